#include "core/tensor/tensor_store.hpp"

#include "core/device/disk_tier.hpp"
#include "core/tensor/quantized_matmul_ops.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace strata {

namespace {

// The matmul shape of a stored matrix (rows unused): in_out is (in, out), out_in is (out, in).
MatmulShape matrix_shape(WeightLayout layout, const std::vector<std::int64_t>& shape) {
  return layout == WeightLayout::in_out ? MatmulShape{0, shape[0], shape[1], layout}
                                        : MatmulShape{0, shape[1], shape[0], layout};
}

}  // namespace

TensorStore::~TensorStore() {
  // Copies still in flight must land before their buffers go back to the arenas. While unwinding
  // from a device failure the wait may throw too: the buffers are then abandoned with the device.
  try {
    for (PendingMove& move : pending_)
      if (move.ticket != 0)
        (void)(move.disk ? disk_tier_->wait(move.ticket) : backend_.copy_stream().wait(move.ticket));
  } catch (...) {
  }
}

int TensorStore::add_row(std::string name, int layer, std::vector<std::int64_t> shape, MemoryCategory category,
                         TensorGroup group, ElementType element) {
  TensorRow row;
  row.name = std::move(name);
  row.layer = layer;
  row.shape = std::move(shape);
  row.element = element;
  row.category = category;
  row.group = group;
  row.home = Home::device;
  const int index = table_.add(std::move(row));
  buffers_.emplace_back();
  pending_.emplace_back();
  host_copy_.emplace_back();
  disk_offset_.push_back(-1);
  disk_current_.push_back(0);
  zeroed_.push_back(0);
  return index;
}

const ParameterRows& TensorStore::add_parameter(const std::string& name, int layer, std::vector<std::int64_t> shape,
                                                ParamKind kind, DType storage, const StateLayout& state, bool trained,
                                                WeightLayout layout) {
  // bf16 is the store's own narrowing; every other non-f32 storage is a weight quantizer's (i8, f16).
  const bool quantized = storage != DType::f32 && storage != DType::bf16;
  if (quantized && (quantizer_ == nullptr || quantizer_->dtype() != storage || shape.size() != 2))
    throw std::logic_error("tensor store: " + name + " is stored as " + std::string(dtype_name(storage)) +
                           " without a weight quantizer for it");
  ParameterRows rows;
  rows.name = name;
  rows.layer = layer;
  rows.kind = kind;
  rows.decay = kind == ParamKind::matrix || kind == ParamKind::embedding;
  rows.layout = layout;
  rows.param = add_row(name, layer, shape, MemoryCategory::weights, TensorGroup::weights, storage);
  if (quantized) {
    QuantizedLayout layout;
    if (Status status = quantizer_->layout(matrix_shape(rows.layout, shape), layout); !status)
      throw std::invalid_argument(status.message());  // the manifest check refused this already
    rows.group_size = layout.group_size;
    if (layout.side_bytes > 0)  // a format without side data (f16) has none
      rows.scales = add_row(name + ".scales", layer, {static_cast<std::int64_t>(layout.side_bytes)},
                            MemoryCategory::weights, TensorGroup::weights, DType::u8);
  }
  parameter_of_row_.resize(table_.rows().size(), -1);
  parameter_of_row_[static_cast<std::size_t>(rows.param)] = static_cast<int>(parameters_.size());
  if (!trained) {
    parameters_.push_back(std::move(rows));
    return parameters_.back();
  }
  rows.grad = add_row(name + ".grad", layer, shape, MemoryCategory::grads, TensorGroup::grads);
  const std::int64_t count = table_.row(rows.param).elements();
  for (std::size_t s = 0; s < state.size(); ++s) {
    if (state[s].count <= 0) continue;
    // A buffer of the parameter's length keeps its shape (checkpoints name it so); others are flat.
    std::vector<std::int64_t> state_shape = state[s].count == count ? shape : std::vector<std::int64_t>{state[s].count};
    rows.state[s] = add_row(name + ".state" + std::to_string(s), layer, std::move(state_shape),
                            MemoryCategory::optimizer, TensorGroup::optimizer_state, state[s].dtype);
  }
  if (storage != DType::f32)
    rows.master = add_row(name + ".master", layer, shape, MemoryCategory::optimizer, TensorGroup::optimizer_state);
  parameters_.push_back(std::move(rows));
  return parameters_.back();
}

void TensorStore::use_weight_quantizer(WeightQuantizer& quantizer, std::string label) {
  quantizer_ = &quantizer;
  quantized_ops_ = std::make_unique<QuantizedMatmulOps>(backend_.ops(), quantizer, std::move(label));
}

void TensorStore::allocate_persistent() {
  for (int row = 0; row < static_cast<int>(table_.rows().size()); ++row)
    if (table_.row(row).category != MemoryCategory::activations && !allocated(row) && !on_demand_.contains(row))
      allocate(row, true);
}

void TensorStore::allocate(int row, bool zero) {
  const TensorRow& r = table_.row(row);
  zeroed_[static_cast<std::size_t>(row)] = 0;
  if (r.home == Home::disk) {
    // A fresh extent reads as zeros: the row starts there, never in memory.
    if (disk_tier_ == nullptr)
      throw std::invalid_argument(r.name + " is placed on disk, but the run has no disk tier: set [device] disk_path");
    const std::size_t index = static_cast<std::size_t>(row);
    if (disk_offset_[index] < 0)
      disk_offset_[index] = static_cast<std::int64_t>(disk_tier_->reserve(r.bytes(), r.name, r.element));
    disk_tier_->hold(r.category, r.bytes());
    return;
  }
  Allocator& arena = r.home == Home::device ? backend_.device_memory() : backend_.host_memory();
  Buffer& buffer = buffers_[static_cast<std::size_t>(row)];
  buffer = arena.allocate(r.bytes(), r.category, "core");
  if (!zero) return;
  if (r.home == Home::device)
    backend_.ops().fill(buffer.data(), 0, r.bytes());
  else
    backend_.zero_host_memory(buffer.data(), r.bytes());  // the host arena is host memory
}

std::int64_t TensorStore::matmul_scratch_floats(const ParameterRows& rows, std::int64_t input_rows) const {
  const TensorRow& row = table_.row(rows.param);
  if (row.element == DType::f32 || row.shape.size() != 2) return 0;
  std::int64_t wanted = row.elements();
  if (quantizer_ != nullptr && row.element == quantizer_->dtype()) {
    MatmulShape shape = matrix_shape(rows.layout, row.shape);
    shape.rows = input_rows;
    wanted = std::max(wanted, quantizer_->scratch_floats(shape));
  }
  return wanted;
}

void TensorStore::release(int row) {
  if (row_guard_) row_guard_(row);
  // A copy still reading or writing the row lands first: its buffers are about to go.
  if (pending_[static_cast<std::size_t>(row)].ticket != 0) complete_rows({row});
  buffers_[static_cast<std::size_t>(row)].reset();
  host_copy_[static_cast<std::size_t>(row)].reset();
  zeroed_[static_cast<std::size_t>(row)] = 0;
  TensorRow& r = table_.row(row);
  if (r.group == TensorGroup::activations) r.home = Home::device;  // allocated again, it is computed on
}

Weight TensorStore::weight(int row) const noexcept {
  Weight weight{data(row), table_.row(row).element};
  const std::size_t index = static_cast<std::size_t>(row);
  if (index < parameter_of_row_.size() && parameter_of_row_[index] >= 0) {
    const ParameterRows& rows = parameters_[static_cast<std::size_t>(parameter_of_row_[index])];
    if (rows.scales >= 0) weight.scales = data(rows.scales), weight.group_size = rows.group_size;
  }
  return weight;
}

TensorView TensorStore::view(int row) const noexcept {
  const TensorRow& r = table_.row(row);
  return TensorView{r.name,    r.layer,      data(row),
                    r.element, r.elements(), r.home == Home::device ? MemorySpace::device : MemorySpace::host};
}

bool TensorStore::any_on_disk() const {
  return std::any_of(table_.rows().begin(), table_.rows().end(),
                     [](const TensorRow& r) { return r.home == Home::disk; });
}

void TensorStore::publish_weights(std::int64_t step) {
  if (std::none_of(parameters_.begin(), parameters_.end(), [](const ParameterRows& rows) { return rows.master >= 0; }))
    return;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  for (const ParameterRows& rows : parameters_) {
    if (rows.master < 0) continue;
    if (held_elsewhere(rows.master)) continue;  // another data-parallel rank's
    const DiskLoan master(*this, {rows.master}, DiskLoan::Access::read);
    const DiskLoan weights(*this, stored_weight_rows(rows), DiskLoan::Access::write);  // a block's weights on disk
    publish(rows, step);
  }
}

void TensorStore::publish_layer_weights(std::int64_t step, int layer) {
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  for (const ParameterRows& rows : parameters_)
    if (rows.master >= 0 && rows.layer == layer) publish(rows, step);
}

void TensorStore::publish(const ParameterRows& rows, std::int64_t step) {
  complete_rows({rows.param, rows.master});
  if (rows.scales >= 0) complete_rows({rows.scales});
  mark_weights_written(rows);
  if (table_.row(rows.param).element == DType::bf16 && rounding_ != nullptr)
    rounding_->round(bf16(rows.param), f32(rows.master), table_.row(rows.master).elements(),
                     RoundingCall{rows.name, step, true});
  else if (table_.row(rows.param).element == DType::bf16)
    ops_for_rows({rows.param, rows.master})
        .narrow(bf16(rows.param), f32(rows.master), table_.row(rows.master).elements());
  else
    quantize(rows, f32(rows.master));
}

Ops& TensorStore::ops_for_rows(std::initializer_list<int> rows) noexcept {
  const bool on_host = update_on_host_ && std::all_of(rows.begin(), rows.end(),
                                                      [&](int row) { return table_.row(row).home == Home::host; });
  return on_host ? backend_.host_ops() : backend_.ops();
}

void TensorStore::quantize(const ParameterRows& rows, const float* master) {
  const QuantizedMatrix out{data(rows.param), rows.scales >= 0 ? data(rows.scales) : nullptr, rows.group_size};
  quantizer_->quantize(out, master, matrix_shape(rows.layout, table_.row(rows.param).shape));
}

bool TensorStore::writes_stored_slices(const ParameterRows& rows) const noexcept {
  const DType element = table_.row(rows.param).element;
  return element == DType::f32 || (element == DType::bf16 && rounding_ == nullptr);
}

void TensorStore::write_stored_values(const ParameterRows& rows, std::span<const float> values, std::size_t first) {
  const TensorRow& row = table_.row(rows.param);
  mark_weights_written(rows);
  // A tensor's first values may be all it is given (the padded rows of an embedding stay as they
  // are); a slice from further on only where the storage takes slices.
  if (first + values.size() > static_cast<std::size_t>(row.elements()) || (first != 0 && !writes_stored_slices(rows)))
    throw std::logic_error("tensor store: " + row.name + " (" + std::to_string(row.elements()) +
                           " values) cannot take elements from " + std::to_string(first) + ", " +
                           std::to_string(values.size()) + " of them");
  if (row.element == DType::f32) {
    backend_.ops().copy_from_host(f32(rows.param) + first, values.data(), values.size_bytes());
  } else if (row.element == DType::bf16 && rounding_ != nullptr) {
    Buffer staging = backend_.device_memory().allocate(values.size_bytes(), MemoryCategory::workspace, "core");
    backend_.ops().copy_from_host(staging.data(), values.data(), values.size_bytes());
    rounding_->round(bf16(rows.param), static_cast<const float*>(staging.data()),
                     static_cast<std::int64_t>(values.size()), RoundingCall{rows.name, 0, false});
    backend_.synchronize();  // the staging buffer goes back to the arena when this returns
  } else if (row.element == DType::bf16) {
    std::vector<std::uint16_t> narrowed(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) narrowed[i] = f32_to_bf16(values[i]);
    backend_.ops().copy_from_host(bf16(rows.param) + first, narrowed.data(), narrowed.size() * sizeof(std::uint16_t));
  } else {
    if (values.size() != static_cast<std::size_t>(row.elements()))
      throw std::logic_error("tensor store: " + row.name + " is quantized whole; " + std::to_string(values.size()) +
                             " of its " + std::to_string(row.elements()) + " values were given");
    Buffer staging = backend_.device_memory().allocate(values.size_bytes(), MemoryCategory::workspace, "core");
    backend_.ops().copy_from_host(staging.data(), values.data(), values.size_bytes());
    quantize(rows, static_cast<const float*>(staging.data()));
    backend_.synchronize();  // the staging buffer goes back to the arena when this returns
  }
}

void TensorStore::zero(float* data, std::int64_t count) {
  auto timer = profiler_.scope(ProfileKind::zero_fill);
  backend_.ops().fill(data, 0, static_cast<std::uint64_t>(count) * sizeof(float));
}

void TensorStore::zero_grads() {
  std::vector<int> grad_rows;
  for (const ParameterRows& rows : parameters_)
    if (rows.grad >= 0) grad_rows.push_back(rows.grad);
  complete_rows(grad_rows);
  for (const ParameterRows& rows : parameters_) {
    if (rows.grad < 0 || !allocated(rows.grad)) continue;  // the fused update's blocks: allocated zeroed when used
    const TensorRow& r = table_.row(rows.grad);
    if (r.home == Home::device)
      zero(f32(rows.grad), r.elements());
    else
      zeroed_[static_cast<std::size_t>(rows.grad)] = 1;  // written where it goes next, or when read
  }
}

void TensorStore::write_zeros(int row) const noexcept {
  auto timer = profiler_.scope(ProfileKind::zero_fill);
  zeroed_[static_cast<std::size_t>(row)] = 0;
  backend_.zero_host_memory(buffers_[static_cast<std::size_t>(row)].data(), table_.row(row).bytes());
}

std::vector<int> TensorStore::group_rows(int layer, TensorGroup group) const {
  std::vector<int> rows;
  if (group == TensorGroup::activations) {
    for (int row = 0; row < static_cast<int>(table_.rows().size()); ++row) {
      const TensorRow& r = table_.row(row);
      if (layer >= 0 && r.layer == layer && r.category == MemoryCategory::activations) rows.push_back(row);
    }
    return rows;
  }
  for (const ParameterRows& parameter : parameters_) {
    if (parameter.layer != layer) continue;
    if (group == TensorGroup::weights) rows.push_back(parameter.param);
    if (group == TensorGroup::weights && parameter.scales >= 0) rows.push_back(parameter.scales);
    if (group == TensorGroup::grads && parameter.grad >= 0) rows.push_back(parameter.grad);
    if (group == TensorGroup::masters && parameter.master >= 0) rows.push_back(parameter.master);
    if (group == TensorGroup::optimizer_state) {
      for (int state : parameter.state)
        if (state >= 0) rows.push_back(state);
      if (parameter.master >= 0) rows.push_back(parameter.master);
    }
  }
  return rows;
}

void TensorStore::set_stand_in(int value_row, int code_row) {
  stand_in_.resize(table_.rows().size(), -1);
  code_row_.resize(table_.rows().size(), false);
  stand_in_.at(static_cast<std::size_t>(value_row)) = code_row;
  code_row_.at(static_cast<std::size_t>(code_row)) = true;
}

Residence TensorStore::residence(int layer, TensorGroup group) const {
  const std::vector<int> rows = group_rows(layer, group);
  if (rows.empty()) return Residence::absent;
  if (group == TensorGroup::activations) {
    // On the host if any held row is there (an eviction keeps the output the next block still
    // reads); on the device when every row is held there; absent when some are not held (dropped,
    // or not computed yet).
    bool all_held = true;
    for (int row : rows) {
      const auto index = static_cast<std::size_t>(row);
      if (index < code_row_.size() && code_row_[index]) continue;  // read with its value row
      const int code = index < stand_in_.size() ? stand_in_[index] : -1;
      const int held = allocated(row) ? row : code >= 0 && allocated(code) ? code : -1;
      if (held < 0) {
        all_held = false;
        continue;
      }
      if (table_.row(held).home == Home::host) return Residence::host;
    }
    return all_held ? Residence::device : Residence::absent;
  }
  return residence_of(table_.row(rows.front()).home);
}

void TensorStore::move_group(int layer, TensorGroup group, Home to) {
  begin_move_group(layer, group, to);
  complete_moves(layer, group);
}

void TensorStore::begin_move_group(int layer, TensorGroup group, Home to) {
  begin_move_rows(group_rows(layer, group), to);
}

void TensorStore::begin_move_rows(const std::vector<int>& rows, Home to) {
  for (int row : rows) {
    TensorRow& r = table_.row(row);
    if (r.home == to) continue;
    if (row_guard_) row_guard_(row);
    if (to == Home::disk || r.home == Home::disk) {
      begin_disk_move(row, to);
      continue;
    }
    // Moving on before the last move landed: let it land first, so copies never chain buffers (and a
    // row being read in from disk, which holds no buffer until then, is not taken for unallocated).
    if (pending_[static_cast<std::size_t>(row)].ticket != 0) complete_rows({row});
    if (!allocated(row)) {
      // Not allocated: a persistent row's home changes and it is allocated there later; an
      // activation not held now (dropped, or not yet computed) is computed on the device.
      if (r.group != TensorGroup::activations) r.home = to;
      continue;
    }
    if (zeroed_[static_cast<std::size_t>(row)] != 0 && to == Home::device) {
      // Zeros need no bytes from the host: filled on the device, in stream order before any op
      // that reads them; the host memory goes back to its arena.
      Buffer zeros = backend_.device_memory().allocate(r.bytes(), r.category, "core");
      {
        auto timer = profiler_.scope(ProfileKind::zero_fill);
        backend_.ops().fill(zeros.data(), 0, r.bytes());
      }
      buffers_[static_cast<std::size_t>(row)] = std::move(zeros);
      zeroed_[static_cast<std::size_t>(row)] = 0;
      r.home = to;
      continue;
    }
    Buffer& host_copy = host_copy_[static_cast<std::size_t>(row)];
    if (to == Home::host && host_copy) {
      buffers_[static_cast<std::size_t>(row)] = std::move(host_copy);  // frees the device copy; nothing to copy
      r.home = to;
      continue;
    }
    Allocator& arena = to == Home::device ? backend_.device_memory() : backend_.host_memory();
    PendingMove& move = pending_[static_cast<std::size_t>(row)];
    move.destination = arena.allocate(r.bytes(), r.category, "core");
    move.ticket = backend_.copy_stream().enqueue(move.destination.data(), data(row), r.bytes());
    r.home = to;
    ++moves_in_flight_;
    (to == Home::device ? transfers_.bytes_to_device : transfers_.bytes_to_host) += r.bytes();
  }
}

void TensorStore::begin_disk_move(int row, Home to) {
  TensorRow& r = table_.row(row);
  const std::size_t index = static_cast<std::size_t>(row);
  if (r.group == TensorGroup::activations || r.group == TensorGroup::grads)
    throw std::invalid_argument(r.name + ": only optimizer state and weights may live on disk");
  // A move in flight lands first: a row being read in is held nowhere until then.
  if (pending_[index].ticket != 0) complete_rows({row});
  if (!allocated(row)) {  // placed before allocation: it starts there
    r.home = to;
    return;
  }
  if (to == Home::device || r.home == Home::device)
    throw std::logic_error(r.name + ": rows move between the disk and the host only (" + home_name(r.home) + " to " +
                           home_name(to) + ")");
  if (disk_tier_ == nullptr)
    throw std::invalid_argument(r.name + " is placed on disk, but the run has no disk tier: set [device] disk_path");
  PendingMove& move = pending_[index];
  if (to == Home::disk) {
    if (disk_offset_[index] < 0)
      disk_offset_[index] = static_cast<std::int64_t>(disk_tier_->reserve(r.bytes(), r.name, r.element));
    move.ticket = disk_tier_->write(static_cast<std::uint64_t>(disk_offset_[index]), data(row), r.bytes());
    disk_tier_->hold(r.category, r.bytes());
  } else {
    move.destination = backend_.host_memory().allocate(r.bytes(), r.category, "core");
    move.ticket = disk_tier_->read(static_cast<std::uint64_t>(disk_offset_[index]), move.destination.data(), r.bytes());
    disk_tier_->release(r.category, r.bytes());
  }
  move.disk = true;
  r.home = to;
  ++moves_in_flight_;
  // Once this lands, memory and disk hold the same bytes (a write frees the memory, a read fills it).
  if (r.group == TensorGroup::weights) disk_current_[index] = 1;
}

std::optional<DiskTier::Linked> TensorStore::link_from_disk(int row, const std::filesystem::path& path,
                                                            std::string& why) {
  const std::size_t index = static_cast<std::size_t>(row);
  if (pending_[index].ticket != 0) complete_rows({row});  // a write behind lands first
  if (disk_tier_ == nullptr || table_.row(row).home != Home::disk || disk_offset_[index] < 0)
    throw std::logic_error(table_.row(row).name + ": linked from disk, but it is not on disk");
  return disk_tier_->link(static_cast<std::uint64_t>(disk_offset_[index]), path, why);
}

std::vector<int> TensorStore::borrow_from_disk(const std::vector<int>& rows) {
  std::vector<int> borrowed = read_from_disk(rows);
  complete_rows(borrowed);
  return borrowed;
}

void TensorStore::return_to_disk(const std::vector<int>& rows, bool changed) {
  if (rows.empty()) return;  // nothing was borrowed (the common case: no row lives on disk)
  // The device may still be running kernels on these rows (on CUDA they are mapped host memory):
  // they finish before the tier's thread reads the rows or their buffers go back to the arena.
  backend_.synchronize();
  if (changed) {
    // One return's writes in flight at a time: the earlier one's host copies go first, so a run of
    // returns (initial values, a load) never holds more than two tensors' rows in memory.
    complete_rows(returning_);
    begin_move_rows(rows, Home::disk);
    returning_ = rows;
    return;
  }
  complete_rows(rows);
  for (int row : rows)
    if (table_.row(row).home == Home::host && disk_offset_[static_cast<std::size_t>(row)] >= 0) drop_to_disk(row);
}

void TensorStore::drop_to_disk(int row) {
  if (row_guard_) row_guard_(row);
  TensorRow& r = table_.row(row);
  buffers_[static_cast<std::size_t>(row)].reset();  // the disk's copy is current
  r.home = Home::disk;
  disk_tier_->hold(r.category, r.bytes());
}

std::vector<int> TensorStore::read_from_disk(const std::vector<int>& rows) {
  std::vector<int> on_disk;
  for (int row : rows)
    if (table_.row(row).home == Home::disk && allocated(row)) on_disk.push_back(row);
  if (on_disk.empty()) return on_disk;
  collect_finished_moves();  // writes that have landed hand their memory back before more is taken
  begin_move_rows(on_disk, Home::host);
  return on_disk;
}

void TensorStore::write_to_disk(const std::vector<int>& rows) {
  collect_finished_moves();
  std::vector<int> written;
  for (int row : rows) {
    const std::size_t index = static_cast<std::size_t>(row);
    TensorRow& r = table_.row(row);
    if (r.home != Home::host || disk_offset_[index] < 0) continue;
    if (pending_[index].ticket != 0) complete_rows({row});  // a copy still filling it from the device
    if (r.group == TensorGroup::weights && disk_current_[index] != 0)
      drop_to_disk(row);
    else
      written.push_back(row);
  }
  if (written.empty()) return;
  backend_.synchronize();  // kernels still reading these rows finish before the tier's thread does
  begin_move_rows(written, Home::disk);
}

std::vector<int> TensorStore::rows_on_disk(int layer, std::initializer_list<TensorGroup> groups) const {
  std::vector<int> rows;
  for (TensorGroup group : groups)
    for (int row : group_rows(layer, group))
      if (table_.row(row).home == Home::disk && std::find(rows.begin(), rows.end(), row) == rows.end())
        rows.push_back(row);
  return rows;
}

void TensorStore::bring_to_device(const std::vector<int>& rows) {
  if (moves_in_flight_ > 0) complete_rows(rows);
  const auto on_host = [&](int row) { return allocated(row) && table_.row(row).home == Home::host; };
  if (std::none_of(rows.begin(), rows.end(), on_host)) return;
  begin_move_rows(rows, Home::device);
  complete_rows(rows);
}

void TensorStore::complete_rows(const std::vector<int>& rows) {
  CopyTicket last = 0;
  CopyTicket last_disk = 0;
  for (int row : rows) {
    const PendingMove& move = pending_[static_cast<std::size_t>(row)];
    CopyTicket& newest = move.disk ? last_disk : last;
    newest = std::max(newest, move.ticket);
  }
  if (last == 0 && last_disk == 0) return;
  {
    // Copies complete in issue order, so waiting for the newest covers them all.
    auto timer = profiler_.scope(ProfileKind::residency_transfer);
    if (last != 0) transfers_.exposed_seconds += backend_.copy_stream().wait(last);
    // The tier counts compute's waits on it itself (DiskTierStats::waited_seconds): adding them
    // here too would report disk time as the copy stream's, unhidden.
    if (last_disk != 0) (void)disk_tier_->wait(last_disk);
  }
  for (int row : rows) {
    PendingMove& move = pending_[static_cast<std::size_t>(row)];
    if (move.ticket == 0) continue;
    Buffer& source = buffers_[static_cast<std::size_t>(row)];
    const TensorRow& r = table_.row(row);
    if (r.group == TensorGroup::weights && r.home == Home::device)
      host_copy_[static_cast<std::size_t>(row)] = std::move(source);  // kept: evicting these weights is free
    source = std::move(move.destination);  // frees the source unless kept above (a disk write: always)
    move.ticket = 0;
    move.disk = false;
    --moves_in_flight_;
  }
}

void TensorStore::complete_moves(int layer, TensorGroup group) {
  if (moves_in_flight_ == 0) return;  // the common case, on every block of every step
  complete_rows(group_rows(layer, group));
}

void TensorStore::drop_stale_weight_copies(std::optional<int> layer) {
  for (const ParameterRows& rows : parameters_) {
    if (layer && rows.layer != *layer) continue;
    mark_weights_written(rows);
    if (table_.row(rows.param).home == Home::device) host_copy_[static_cast<std::size_t>(rows.param)].reset();
  }
}

void TensorStore::mark_weights_written(const ParameterRows& rows) noexcept {
  disk_current_[static_cast<std::size_t>(rows.param)] = 0;
  if (rows.scales >= 0) disk_current_[static_cast<std::size_t>(rows.scales)] = 0;
}

void TensorStore::collect_finished_moves() {
  if (moves_in_flight_ == 0) return;
  const CopyTicket landed = backend_.copy_stream().completed();
  const CopyTicket landed_on_disk = disk_tier_ != nullptr ? disk_tier_->completed() : 0;
  std::vector<int> rows;
  for (std::size_t row = 0; row < pending_.size(); ++row)
    if (pending_[row].ticket != 0 && pending_[row].ticket <= (pending_[row].disk ? landed_on_disk : landed))
      rows.push_back(static_cast<int>(row));
  complete_rows(rows);
}

void TensorStore::complete_all_moves() {
  if (moves_in_flight_ == 0) return;
  std::vector<int> rows;
  for (std::size_t row = 0; row < pending_.size(); ++row)
    if (pending_[row].ticket != 0) rows.push_back(static_cast<int>(row));
  complete_rows(rows);
}

}  // namespace strata
