#include "core/distributed/data_parallel.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata {

DataParallel::DataParallel(Communicator& communicator, TensorStore& store, int zero)
    : communicator_(communicator), store_(store), zero_(zero) {
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
}

std::vector<int> DataParallel::state_rows(std::size_t index) const {
  std::vector<int> rows;
  for (int row : store_.parameters()[index].state)
    if (row >= 0) rows.push_back(row);
  return rows;
}

void DataParallel::shard_rows() {
  if (zero_ == 0) return;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (owners_[i] < 0 || owners_[i] == rank()) continue;
    store_.allocate_on_demand(state_rows(i));
    if (zero_ >= 2) store_.allocate_on_demand({parameters[i].grad});
  }
}

void DataParallel::prepare_gradients(int layer) {
  if (zero_ < 2) return;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    if (owners_[i] >= 0 && parameters[i].layer == layer && !store_.allocated(parameters[i].grad))
      store_.allocate(parameters[i].grad, /*zero=*/true);
}

void DataParallel::reduce_gradients(int layer) {
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const ParameterRows& rows = parameters[i];
    if (owners_[i] < 0 || rows.layer != layer) continue;
    store_.complete_rows({rows.grad});  // a strategy may be moving it
    const TensorView grad = store_.view(rows.grad);
    const std::span<float> values(grad.f32(), static_cast<std::size_t>(grad.count));
    if (zero_ < 2) {
      all_reduce_sum(communicator_, values, scratch_);
    } else {
      reduce_sum_to(communicator_, values, owners_[i], scratch_);
      if (owners_[i] != rank()) store_.release(rows.grad);
    }
  }
  scratch_ = {};
}

std::vector<TensorView> DataParallel::held_gradients() const {
  std::vector<TensorView> grads;
  for (const ParameterRows& rows : store_.parameters())
    if (rows.grad >= 0 && store_.allocated(rows.grad)) grads.push_back(store_.view(rows.grad));
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
    slot_owner.push_back(zero_ == 0 ? rank() : owners_[i]);
    ++slot;
  }
  std::vector<double> all(mine.size() * static_cast<std::size_t>(ranks()));
  communicator_.all_gather(std::as_bytes(std::span<const double>(mine)), std::as_writable_bytes(std::span(all)));
  double sum = 0.0;
  for (std::size_t slot = 0; slot < mine.size(); ++slot)
    sum += all[static_cast<std::size_t>(slot_owner[slot]) * mine.size() + slot];
  return sum;
}

void DataParallel::share_updated_parameters() {
  if (zero_ == 0) return;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (owners_[i] < 0) continue;
    const TensorView values = store_.values(parameters[i]);
    communicator_.broadcast({static_cast<std::byte*>(values.data), values.bytes()}, owners_[i]);
  }
}

void DataParallel::gather_state_to_root() {
  if (zero_ == 0) return;
  const std::vector<ParameterRows>& parameters = store_.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (owners_[i] <= 0) continue;  // frozen, or rank 0's own
    for (int row : state_rows(i)) {
      if (rank() == 0) {
        store_.allocate(row);
        const TensorView view = store_.view(row);
        communicator_.receive({static_cast<std::byte*>(view.data), view.bytes()}, owners_[i]);
      } else if (owners_[i] == rank()) {
        store_.complete_rows({row});
        const TensorView view = store_.view(row);
        communicator_.send({static_cast<const std::byte*>(view.data), view.bytes()}, 0);
      }
    }
  }
}

void DataParallel::release_gathered_state() {
  if (zero_ == 0 || rank() != 0) return;
  for (std::size_t i = 0; i < owners_.size(); ++i)
    if (owners_[i] > 0)
      for (int row : state_rows(i)) store_.release(row);
}

void DataParallel::hold_all_state() {
  if (zero_ == 0) return;
  for (std::size_t i = 0; i < owners_.size(); ++i)
    if (owners_[i] >= 0 && owners_[i] != rank())
      for (int row : state_rows(i))
        if (!store_.allocated(row)) store_.allocate(row, /*zero=*/true);
}

void DataParallel::release_others_state() {
  if (zero_ == 0) return;
  for (std::size_t i = 0; i < owners_.size(); ++i)
    if (owners_[i] >= 0 && owners_[i] != rank())
      for (int row : state_rows(i)) store_.release(row);
}

double DataParallel::mean(double mine) {
  const std::vector<double> all = all_gather_double(communicator_, mine);
  double sum = 0.0;
  for (double value : all) sum += value;
  return sum / static_cast<double>(all.size());
}

int DataParallel::largest(int mine) {
  const std::vector<double> all = all_gather_double(communicator_, static_cast<double>(mine));
  return static_cast<int>(*std::max_element(all.begin(), all.end()));
}

}  // namespace strata
