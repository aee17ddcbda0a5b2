#pragma once
#include <cmath>
#include <span>

#include "strata/dtype.hpp"
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
  // Divides gradients by the loss scale and checks them; may adjust the scale for the next step.
  virtual Status unscale_and_check(std::span<const TensorView> grads, PrecisionDecision& decision) noexcept = 0;
};

// Parallel when the includer builds with OpenMP; a plain loop otherwise (no unknown-pragma warning).
#if defined(_OPENMP)
#define STRATA_PARALLEL_SUM_LOOP _Pragma("omp parallel for simd reduction(+ : sum) schedule(static)")
#else
#define STRATA_PARALLEL_SUM_LOOP
#endif

// True when every gradient is finite: 0 * x is NaN exactly when x is NaN or infinite, so one sum
// per tensor answers it.
inline bool all_finite(std::span<const TensorView> grads) noexcept {
  for (const TensorView& grad : grads) {
    float sum = 0.0f;
    STRATA_PARALLEL_SUM_LOOP
    for (std::size_t i = 0; i < grad.data.size(); ++i) sum += grad.data[i] * 0.0f;
    if (!std::isfinite(sum)) return false;
  }
  return true;
}

}  // namespace strata
