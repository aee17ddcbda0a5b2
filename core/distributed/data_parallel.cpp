#include "core/distributed/data_parallel.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace strata {

DataParallel::DataParallel(Communicator& communicator, TensorStore& store, int zero, bool overlap)
    : communicator_(communicator), store_(store), zero_(zero), overlap_(overlap) {
  const std::vector<ParameterRows>& parameters = store_.parameters();
  std::int64_t total = 0;
  for (const ParameterRows& rows : parameters)
    if (rows.grad >= 0) total += store_.table().row(rows.param).elements();
  owners_.assign(parameters.size(), -1);
  // A parameter goes to the rank whose share of the elements holds its middle.
  std::int64_t before = 0;
  const std::int64_t n = ranks();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].grad < 0) continue;
    const std::int64_t count = store_.table().row(parameters[i].param).elements();
    owners_[i] = static_cast<int>(std::min(n - 1, (2 * before + count) * n / std::max<std::int64_t>(1, 2 * total)));
    before += count;
  }
  for (const ParameterRows& rows : parameters) n_layer_ = std::max(n_layer_, rows.layer + 1);
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (owners_[i] >= 0)
      for (int row : owner_rows(i)) row_owner_[row] = owners_[i];
  store_.residency().guard_rows([this](int row) { wait_for_row(row); });
}

DataParallel::~DataParallel() {
  store_.residency().guard_rows({});
  try {
    communicator_.wait(last_ticket_);
  } catch (...) {  // the run has failed already, and says why
  }
}

void DataParallel::start(const std::vector<int>& rows, std::function<void()> job) {
  if (!overlap_) {  // here and now: each of the job's calls waits for the communicator's thread
    job();
    return;
  }
  const Communicator::Ticket ticket = communicator_.submit(std::move(job));
  last_ticket_ = ticket;
  for (int row : rows) in_flight_[row] = ticket;
}

void DataParallel::wait_for_row(int row) {
  const auto found = in_flight_.find(row);
  if (found == in_flight_.end()) return;
  const Communicator::Ticket ticket = found->second;
  in_flight_.erase(found);
  communicator_.wait(ticket);
}

std::vector<int> DataParallel::owner_rows(std::size_t index) const {
  std::vector<int> rows;
  if (zero_ == 0) return rows;
  const ParameterRows& parameter = store_.parameters()[index];
  for (int row : parameter.state)
    if (row >= 0) rows.push_back(row);
  if (parameter.master >= 0) rows.push_back(parameter.master);  // optimizer state too
  if (zero_ >= 3)
    for (int row : stored_weight_rows(parameter)) rows.push_back(row);
  return rows;
}

void DataParallel::shard_rows() {
  if (zero_ == 0) return;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (owners_[i] < 0 || owners_[i] == rank()) continue;
    store_.residency().allocate_on_demand(owner_rows(i));
    if (zero_ >= 2) store_.residency().allocate_on_demand({parameters[i].grad});
  }
}

void DataParallel::gather_weights(int layer) {
  if (zero_ < 3) return;
  start_gather(layer);  // nothing when it was prefetched, or is here already
  for (const ParameterRows& parameter : store_.parameters())
    if (parameter.layer == layer)
      for (int row : stored_weight_rows(parameter)) wait_for_row(row);
}

void DataParallel::prefetch_weights(int layer) {
  if (zero_ >= 3 && overlap_) start_gather(layer);
}

void DataParallel::start_gather(int layer) {
  // The same flag on every rank (they make the same calls), so every rank takes part in the same
  // broadcasts, the owner included.
  if (gathered_.empty()) gathered_.assign(static_cast<std::size_t>(n_layer_) + 1, false);
  const std::size_t slot = static_cast<std::size_t>(layer + 1);
  if (gathered_[slot]) return;
  gathered_[slot] = true;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  std::vector<int> rows;
  std::vector<std::pair<std::span<std::byte>, int>> broadcasts;  // (bytes, owner)
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (owners_[i] < 0 || parameters[i].layer != layer) continue;
    for (int row : stored_weight_rows(parameters[i])) {
      if (owners_[i] != rank()) store_.residency().allocate(row);
      store_.residency().complete_rows({row});
      const TensorView view = store_.view(row);
      rows.push_back(row);
      broadcasts.emplace_back(std::span<std::byte>(static_cast<std::byte*>(view.data), view.bytes()), owners_[i]);
    }
  }
  // A plan's dry rows are address space only: touching them would commit it.
  if (broadcasts.empty() || !communicator_.moves_bytes()) return;
  start(rows, [this, broadcasts = std::move(broadcasts)] {
    for (const auto& [bytes, owner] : broadcasts) communicator_.broadcast(bytes, owner);
  });
}

void DataParallel::release_weights(int layer) {
  if (zero_ < 3 || gathered_.empty()) return;
  const std::size_t slot = static_cast<std::size_t>(layer + 1);
  if (!gathered_[slot]) return;
  gathered_[slot] = false;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (owners_[i] >= 0 && owners_[i] != rank() && parameters[i].layer == layer)
      for (int row : stored_weight_rows(parameters[i])) store_.residency().release(row);
}

void DataParallel::prepare_gradients(int layer) {
  if (zero_ < 2) return;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (owners_[i] >= 0 && parameters[i].layer == layer && !store_.residency().allocated(parameters[i].grad))
      store_.residency().allocate(parameters[i].grad, /*zero=*/true);
}

void DataParallel::reduce_gradients(int layer) {
  // The block above's sums have had this block's backward to run in: free what they sent away.
  release_sent_gradients();
  const std::vector<ParameterRows>& parameters = store_.parameters();
  std::vector<int> rows;
  std::vector<std::pair<std::span<float>, int>> sums;  // (gradient, owner)
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const ParameterRows& parameter = parameters[i];
    if (owners_[i] < 0 || parameter.layer != layer) continue;
    store_.residency().complete_rows({parameter.grad});  // a strategy may be moving it
    const TensorView grad = store_.view(parameter.grad);
    rows.push_back(parameter.grad);
    sums.emplace_back(std::span<float>(grad.f32(), static_cast<std::size_t>(grad.count)), owners_[i]);
    if (zero_ >= 2 && owners_[i] != rank()) sent_gradients_.push_back(parameter.grad);
  }
  // A plan's dry rows are address space only: touching them would commit it.
  if (!sums.empty() && communicator_.moves_bytes())
    start(rows, [this, sums = std::move(sums)] {
      for (const auto& [values, owner] : sums) {
        if (zero_ < 2)
          communicator_.sum_to_all(values, scratch_);
        else
          communicator_.sum_to(values, owner, scratch_);
      }
    });
  if (!overlap_) release_sent_gradients();  // sent already
}

void DataParallel::release_sent_gradients() {
  for (int row : sent_gradients_) store_.residency().release(row);  // waits for its sum
  sent_gradients_.clear();
}

void DataParallel::finish_reductions() {
  release_sent_gradients();
  communicator_.wait(last_ticket_);
  in_flight_.clear();
  scratch_ = {};
}

std::vector<TensorView> DataParallel::held_gradients() const {
  std::vector<TensorView> grads;
  for (const ParameterRows& rows : store_.parameters())
    if (rows.grad >= 0 && store_.residency().allocated(rows.grad)) grads.push_back(store_.view(rows.grad));
  return grads;
}

std::vector<ParamSlot> DataParallel::owned(std::span<const ParamSlot> slots) const {
  std::vector<ParamSlot> mine;
  std::size_t slot = 0;
  for (std::size_t i = 0; i < owners_.size(); ++i) {
    if (owners_[i] < 0) continue;
    if (owns(i)) mine.push_back(slots[slot]);
    ++slot;
  }
  return mine;
}

double DataParallel::sum_of_squares(Ops& ops, std::span<const ParamSlot> slots) {
  // Each rank's sums of its slots, every rank's in one exchange; then the slot order.
  std::vector<double> mine(slots.size(), 0.0);
  std::vector<int> slot_owner;
  for (std::size_t i = 0, slot = 0; i < owners_.size(); ++i) {
    if (owners_[i] < 0) continue;
    if (owns(i)) mine[slot] = ops.sum_of_squares(slots[slot].grad.f32(), slots[slot].grad.count);
    slot_owner.push_back(owners_[i]);
    ++slot;
  }
  const std::vector<double> all = all_gather_doubles(communicator_, mine);
  double sum = 0.0;
  for (std::size_t slot = 0; slot < mine.size(); ++slot)
    sum += all[static_cast<std::size_t>(slot_owner[slot]) * mine.size() + slot];
  return sum;
}

void DataParallel::share_updated_parameters() {
  if (zero_ == 0 || zero_ >= 3) return;  // zero 3: a rank gathers the weights when it uses them
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (owners_[i] < 0) continue;
    // The weights as the owner stored them (its published bf16 or int8 and scales, where its master
    // is f32): what every rank computes with, as one process would have rounded them.
    for (int row : stored_weight_rows(parameters[i])) {
      store_.residency().complete_rows({row});
      const TensorView view = store_.view(row);
      if (communicator_.moves_bytes())
        communicator_.broadcast({static_cast<std::byte*>(view.data), view.bytes()}, owners_[i]);
    }
  }
}

namespace {

// The end of a save, in place of a row: rank 0 asks for no more.
constexpr std::int32_t kSaveWritten = -1;

}  // namespace

const void* DataParallel::row_for_save(int row) {
  if (row != held_for_save_ && held_for_save_ >= 0) {
    store_.residency().release(held_for_save_);
    held_for_save_ = -1;
  }
  const auto owner = row_owner_.find(row);
  // Every rank's, or rank 0's own, or here for now (zero 3 gathers a layer's weights for the
  // step); or received already for the piece before.
  if (owner == row_owner_.end() || owner->second == 0 || store_.residency().allocated(row)) {
    store_.residency().complete_rows({row});
    return store_.data(row);
  }
  store_.residency().allocate(row);
  held_for_save_ = row;
  const std::int32_t request = row;
  communicator_.send(std::as_bytes(std::span(&request, 1)), owner->second);
  const TensorView view = store_.view(row);
  communicator_.receive({static_cast<std::byte*>(view.data), view.bytes()}, owner->second);
  return view.data;
}

void DataParallel::end_save() {
  if (held_for_save_ >= 0) store_.residency().release(held_for_save_);
  held_for_save_ = -1;
  const std::int32_t written = kSaveWritten;
  for (int r = 1; r < ranks(); ++r) communicator_.send(std::as_bytes(std::span(&written, 1)), r);
}

void DataParallel::serve_save() {
  for (;;) {
    std::int32_t row = kSaveWritten;
    communicator_.receive(std::as_writable_bytes(std::span(&row, 1)), 0);
    if (row == kSaveWritten) return;
    // A request for a row this rank does not keep is a bug on rank 0's side: said, not answered
    // with whatever lies at a null row.
    const auto owner = row_owner_.find(row);
    if (owner == row_owner_.end() || owner->second != rank() || !store_.residency().allocated(row))
      throw std::logic_error("rank " + std::to_string(rank()) + " was asked for row " + std::to_string(row) +
                             " of a save, which it does not keep");
    store_.residency().complete_rows({row});
    const TensorView view = store_.view(row);
    communicator_.send({static_cast<const std::byte*>(view.data), view.bytes()}, 0);
  }
}

double DataParallel::mean(double mine) {
  const std::vector<double> all = all_gather_doubles(communicator_, {&mine, 1});
  double sum = 0.0;
  for (double value : all) sum += value;
  return sum / static_cast<double>(all.size());
}

std::int64_t DataParallel::total(std::int64_t mine) {
  const auto value = static_cast<double>(mine);
  const std::vector<double> all = all_gather_doubles(communicator_, {&value, 1});
  double sum = 0.0;
  for (double count : all) sum += count;
  return static_cast<std::int64_t>(sum);
}

int DataParallel::largest(int mine) {
  const double value = mine;
  const std::vector<double> all = all_gather_doubles(communicator_, {&value, 1});
  return static_cast<int>(*std::max_element(all.begin(), all.end()));
}

}  // namespace strata
