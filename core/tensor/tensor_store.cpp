#include "core/tensor/tensor_store.hpp"

#include "core/tensor/quantized_matmul_ops.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata {

namespace {

// The matmul shape of a stored matrix (rows unused): in_out is (in, out), out_in is (out, in).
MatmulShape matrix_shape(WeightLayout layout, const std::vector<std::int64_t>& shape) {
  return layout == WeightLayout::in_out ? MatmulShape{0, shape[0], shape[1], layout}
                                        : MatmulShape{0, shape[1], shape[0], layout};
}

}  // namespace

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
  residency_.add_row();
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

void TensorStore::publish_weights(std::int64_t step) {
  if (std::none_of(parameters_.begin(), parameters_.end(), [](const ParameterRows& rows) { return rows.master >= 0; }))
    return;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  for (const ParameterRows& rows : parameters_) {
    if (rows.master < 0) continue;
    if (residency_.held_elsewhere(rows.master)) continue;  // another data-parallel rank's
    const Residency::Loan master(residency_, {rows.master}, Residency::Loan::Access::read);
    // a block's weights on disk
    const Residency::Loan weights(residency_, stored_weight_rows(rows), Residency::Loan::Access::write);
    publish(rows, step);
  }
}

void TensorStore::publish_layer_weights(std::int64_t step, int layer) {
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  for (const ParameterRows& rows : parameters_)
    if (rows.master >= 0 && rows.layer == layer) publish(rows, step);
}

void TensorStore::publish(const ParameterRows& rows, std::int64_t step) {
  residency_.complete_rows({rows.param, rows.master});
  if (rows.scales >= 0) residency_.complete_rows({rows.scales});
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
  residency_.complete_rows(grad_rows);
  for (const ParameterRows& rows : parameters_) {
    // the fused update's blocks: allocated zeroed when used
    if (rows.grad < 0 || !residency_.allocated(rows.grad)) continue;
    const TensorRow& r = table_.row(rows.grad);
    if (r.home == Home::device)
      zero(f32(rows.grad), r.elements());
    else
      residency_.mark_zero(rows.grad);  // written where it goes next, or when read
  }
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

Residence TensorStore::residence(int layer, TensorGroup group) const {
  return residency_.residence(group_rows(layer, group), group == TensorGroup::activations);
}

std::vector<int> TensorStore::rows_on_disk(int layer, std::initializer_list<TensorGroup> groups) const {
  std::vector<int> rows;
  for (TensorGroup group : groups)
    for (int row : group_rows(layer, group))
      if (table_.row(row).home == Home::disk && std::find(rows.begin(), rows.end(), row) == rows.end())
        rows.push_back(row);
  return rows;
}

void TensorStore::complete_moves(int layer, TensorGroup group) {
  if (!residency_.moves_in_flight()) return;  // the common case, on every block of every step
  residency_.complete_rows(group_rows(layer, group));
}

void TensorStore::drop_stale_weight_copies(std::optional<int> layer) {
  for (const ParameterRows& rows : parameters_) {
    if (layer && rows.layer != *layer) continue;
    mark_weights_written(rows);
    if (table_.row(rows.param).home == Home::device) residency_.drop_host_copy(rows.param);
  }
}

void TensorStore::mark_weights_written(const ParameterRows& rows) noexcept {
  residency_.weights_written(rows.param);
  if (rows.scales >= 0) residency_.weights_written(rows.scales);
}

}  // namespace strata
