#pragma once
// The matmul adapters of a model (strata/matmul_adapter.hpp): the planned adapters' tensors, added
// as trainable parameters beside each adapted matrix, and the calls that add their products after
// the matrix's own matmul. A family declares them once its own parameters exist and routes every
// block projection through forward() and backward(), which do nothing for a matrix without one.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/model/adapter_targets.hpp"
#include "core/model/trainable_plan.hpp"
#include "core/tensor/tensor_store.hpp"
#include "strata/matmul_adapter.hpp"

namespace strata {

class ModelAdapters {
 public:
  explicit ModelAdapters(TensorStore& store) : store_(store) {}

  // Adds each planned adapter's tensors beside its target matrix in every block the plan does not
  // skip (block_prefix(l) + target.matrix names the matrix), with optimizer state as `state` lays
  // it out when `training`, and one workspace row for their scratch. `rows` = the model's input rows.
  void declare(const TrainablePlan& plan, const std::vector<AdapterTarget>& targets,
               const std::function<std::string(int layer)>& block_prefix, int n_layer, std::int64_t rows,
               const std::function<StateLayout(const ParamInfo&)>& state, bool training);
  bool empty() const noexcept { return bindings_.empty(); }
  bool adapts(int weight_row) const {
    return std::any_of(bindings_.begin(), bindings_.end(),
                       [weight_row](const Binding& binding) { return binding.weight_row == weight_row; });
  }
  std::string description() const;
  // Training passes draw dropout from `pass.sequence`; evaluation passes draw none.
  void set_pass(const AdapterPass& pass) noexcept { pass_ = pass; }

  // out += the adapters' product, for the matrix whose weight row is `weight_row`.
  void forward(int weight_row, float* out, const float* inp, std::int64_t rows);
  // dinp += their input gradient; their tensors' gradients accumulate.
  void backward(int weight_row, float* dinp, const float* dout, const float* inp, std::int64_t rows);
  // First values of every adapter tensor, written through `write` (Model::write_values).
  void init(std::uint64_t seed, const std::function<void(const ParameterRows&, std::span<const float>)>& write) const;
  // `weight` (the matrix's f32 values, on the host) with its adapters folded in; `values(rows)`
  // reads an adapter tensor to the host.
  void merge(int weight_row, std::span<float> weight,
             const std::function<std::vector<float>(const ParameterRows&)>& values) const;

 private:
  struct Binding {
    MatmulAdapter* adapter = nullptr;
    std::string matrix;  // the adapted parameter's name
    std::string target;
    int layer = 0;
    int index = 0;
    int weight_row = -1;
    MatmulShape shape;            // rows unset
    std::vector<int> parameters;  // indices of its tensors in store.parameters()
  };
  AdaptedMatrix adapted(const Binding& binding, std::int64_t rows) const;
  Scratch scratch() const;

  TensorStore& store_;
  std::vector<Binding> bindings_;
  int scratch_row_ = -1;
  std::int64_t scratch_elements_ = 0;
  AdapterPass pass_;
};

}  // namespace strata
