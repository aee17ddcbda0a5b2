#pragma once
// AdamW's moments and direction composed from the op table's elementwise ops, for an optimizer on
// a backend that runs no host kernel (Ops::supports(Op::host_kernel) is false on CUDA) and that
// brings no kernel of its own: AdamWHyper's formula (strata/op_records.hpp), each op rounding to
// f32, so it agrees with adamw_update_f32 to rounding. examples/third-party-plugin's adamw_llrd runs
// it where it cannot run the fused loop, and galore runs it on each projected gradient.
#include <cmath>
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::plugin_support {

// Before: g holds the (clipped) gradient. After: m and v are the new moments and g holds
// m / (sqrt(v) / sqrt(1 - beta2^t) + eps); `scratch` holds n floats of the ops' own use. All n long,
// on the backend's memory. Needs scale, add_scaled, mul, sqrt and div.
inline void adamw_direction_through_ops(Ops& ops, const AdamWHyper& hyper, float* g, float* m, float* v, float* scratch,
                                        std::int64_t n) noexcept {
  const float b1 = hyper.beta1, b2 = hyper.beta2;
  const float inverse_sqrt_correction2 = 1.0f / std::sqrt(1.0f - std::pow(b2, static_cast<float>(hyper.step)));
  ops.scale(m, b1, n);
  ops.add_scaled(m, 1.0f - b1, g, n);
  ops.mul(scratch, g, g, n);
  ops.scale(v, b2, n);
  ops.add_scaled(v, 1.0f - b2, scratch, n);
  ops.sqrt(scratch, v, n);
  ops.scale(scratch, inverse_sqrt_correction2, n);
  ops.div(g, m, scratch, hyper.eps, n);
}

// The step along that direction: lr / (1 - beta1^t) (the first moment's bias correction).
inline float adamw_step_size(const AdamWHyper& hyper) noexcept {
  return hyper.lr / (1.0f - std::pow(hyper.beta1, static_cast<float>(hyper.step)));
}

}  // namespace strata::plugin_support
