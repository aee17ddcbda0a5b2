#include "core/model/model_adapters.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata {

void ModelAdapters::declare(const TrainablePlan& plan, const std::vector<AdapterTarget>& targets,
                            const std::function<std::string(int layer)>& block_prefix, int n_layer, std::int64_t rows,
                            const std::function<StateLayout(const ParamInfo&)>& state, bool training) {
  std::int64_t largest_scratch = 0;
  for (int layer = 0; layer < n_layer; ++layer) {
    if (plan.skips(layer)) continue;  // the identity has no matrices to adapt
    for (const PlannedAdapter& planned : plan.adapters) {
      const auto target = std::find_if(targets.begin(), targets.end(), [&](const AdapterTarget& candidate) {
        return candidate.target == planned.target;
      });
      if (target == targets.end()) throw std::logic_error("adapter target '" + planned.target + "' is not planned");
      Binding binding;
      binding.adapter = planned.adapter;
      binding.matrix = block_prefix(layer) + target->matrix;
      binding.target = planned.target;
      binding.layer = layer;
      binding.index = static_cast<int>(bindings_.size());
      binding.shape = target->shape;
      const auto& parameters = store_.parameters();
      const auto matrix = std::find_if(parameters.begin(), parameters.end(), [&](const ParameterRows& candidate) {
        return candidate.name == binding.matrix;
      });
      if (matrix == parameters.end()) throw std::logic_error("no parameter " + binding.matrix + " to adapt");
      binding.weight_row = matrix->param;
      // Tensors are named after the matrix without its ".weight": h.3.attn.c_attn.lora_A.
      std::string base = binding.matrix;
      if (base.ends_with(".weight")) base.resize(base.size() - 7);
      for (const AdapterTensor& tensor : planned.adapter->tensors(binding.shape)) {
        const std::string name = base + "." + tensor.name;
        // An adapter's factors are matrices of the shapes it declares, read as (in, out).
        const StateLayout layout = training && state ? state({name, layer, ParamKind::matrix, tensor.shape,
                                                              WeightLayout::in_out, shape_elements(tensor.shape), true})
                                                     : StateLayout{};
        store_.add_parameter(name, layer, tensor.shape, ParamKind::matrix, DType::f32, layout, training,
                             WeightLayout::in_out);
        const int index = static_cast<int>(store_.parameters().size()) - 1;
        store_.set_role(index, ParameterRole::adapter);
        binding.parameters.push_back(index);
      }
      MatmulShape with_rows = binding.shape;
      with_rows.rows = rows;
      largest_scratch = std::max(largest_scratch, planned.adapter->scratch_floats(with_rows));
      bindings_.push_back(std::move(binding));
    }
  }
  if (largest_scratch > 0) {
    scratch_elements_ = largest_scratch;
    scratch_row_ =
        store_.add_row("ws.adapter", -1, {largest_scratch}, MemoryCategory::workspace, TensorGroup::activations);
  }
}

std::string ModelAdapters::description() const {
  std::string text;
  for (const Binding& binding : bindings_) {
    if (binding.layer != bindings_.front().layer) break;  // every block has the same
    text += (text.empty() ? "" : ", ") + binding.target + ": " + binding.adapter->describe();
  }
  return text;
}

AdaptedMatrix ModelAdapters::adapted(const Binding& binding, std::int64_t rows) const {
  MatmulShape shape = binding.shape;
  shape.rows = rows;
  return AdaptedMatrix{binding.matrix, binding.target, binding.layer, binding.index, shape};
}

Scratch ModelAdapters::scratch() const {
  return Scratch{scratch_row_ >= 0 ? store_.f32(scratch_row_) : nullptr, scratch_elements_};
}

// The tensors' pointers are read at each call: residency may have moved them since the last.
void ModelAdapters::forward(int weight_row, float* out, const float* inp, std::int64_t rows) {
  for (const Binding& binding : bindings_) {
    if (binding.weight_row != weight_row) continue;
    std::vector<const float*> values;
    for (int p : binding.parameters)
      values.push_back(store_.f32(store_.parameters()[static_cast<std::size_t>(p)].param));
    binding.adapter->forward(store_.ops(), adapted(binding, rows), pass_, out, inp, AdapterTensors{values, {}},
                             scratch());
  }
}

void ModelAdapters::backward(int weight_row, float* dinp, const float* dout, const float* inp, std::int64_t rows) {
  for (const Binding& binding : bindings_) {
    if (binding.weight_row != weight_row) continue;
    std::vector<const float*> values;
    std::vector<float*> grads;
    for (int p : binding.parameters) {
      const ParameterRows& parameter = store_.parameters()[static_cast<std::size_t>(p)];
      values.push_back(store_.f32(parameter.param));
      if (parameter.grad < 0) throw std::logic_error(parameter.name + " has no gradient row to train");
      grads.push_back(store_.f32(parameter.grad));
    }
    binding.adapter->backward(store_.ops(), adapted(binding, rows), pass_, dinp, dout, inp,
                              AdapterTensors{values, grads}, scratch());
  }
}

void ModelAdapters::init(std::uint64_t seed,
                         const std::function<void(const ParameterRows&, std::span<const float>)>& write) const {
  for (const Binding& binding : bindings_) {
    std::vector<std::vector<float>> values;
    for (int p : binding.parameters)
      values.emplace_back(static_cast<std::size_t>(
          store_.table().row(store_.parameters()[static_cast<std::size_t>(p)].param).elements()));
    std::vector<std::span<float>> spans(values.begin(), values.end());
    binding.adapter->init(adapted(binding, 0), spans, seed);
    for (std::size_t t = 0; t < values.size(); ++t)
      write(store_.parameters()[static_cast<std::size_t>(binding.parameters[t])], values[t]);
  }
}

void ModelAdapters::merge(int weight_row, std::span<float> weight,
                          const std::function<std::vector<float>(const ParameterRows&)>& values) const {
  for (const Binding& binding : bindings_) {
    if (binding.weight_row != weight_row) continue;
    std::vector<std::vector<float>> host;
    for (int p : binding.parameters) host.push_back(values(store_.parameters()[static_cast<std::size_t>(p)]));
    std::vector<std::span<const float>> spans(host.begin(), host.end());
    binding.adapter->merge(weight, binding.shape, spans);
  }
}

}  // namespace strata
