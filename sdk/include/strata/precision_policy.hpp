#pragma once
#include <span>

#include "strata/dtype.hpp"
#include "strata/ops.hpp"
#include "strata/status.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

struct PrecisionDecision {
  bool skip_step = false;  // gradients were not finite: do not apply this update
  double loss_scale = 1.0;
};

// How the model stores numbers and how its gradients are checked. Compute is f32 on the CPU
// backend whatever the storage: a bf16 tensor is widened to f32 where a kernel reads it.
class PrecisionPolicy {
 public:
  virtual ~PrecisionPolicy() = default;
  // Storage of the weight matrices (embeddings and the blocks' projections). With bf16, the
  // optimizer updates an f32 master copy and the model reads the bf16 rounding of it.
  virtual DType weight_storage() const noexcept = 0;
  // Storage of the activations a block keeps for its backward pass.
  virtual DType activation_storage() const noexcept = 0;
  // The factor the loss gradient is multiplied by before backward.
  virtual double loss_scale() const noexcept = 0;
  // Divides gradients by the loss scale and checks them (through `ops`: the gradients are the
  // backend's memory); may adjust the scale for the next step. May throw: the host reports it.
  virtual Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) = 0;
};

}  // namespace strata
