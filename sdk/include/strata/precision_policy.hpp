#pragma once
#include <span>

#include "strata/dtype.hpp"
#include "strata/status.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

struct PrecisionDecision {
  bool skip_step = false;  // gradients were not finite: do not apply this update
  double loss_scale = 1.0;
};

class PrecisionPolicy {
 public:
  virtual ~PrecisionPolicy() = default;
  virtual DType weight_storage() const noexcept = 0;
  // The factor the loss gradient is multiplied by before backward.
  virtual double loss_scale() const noexcept = 0;
  // Divides gradients by the loss scale and checks them; may adjust the scale for the next step.
  virtual Status unscale_and_check(std::span<const TensorView> grads, PrecisionDecision& decision) noexcept = 0;
};

}  // namespace strata
