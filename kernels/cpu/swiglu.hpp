#pragma once
// SwiGLU's gate: out = silu(gate) * up, silu(g) = g * sigmoid(g). Backward:
//   dgate = dout * up * sigmoid(g) * (1 + g * (1 - sigmoid(g))),  dup = dout * silu(g)
// written or added per `write`.
#include <cmath>
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cpu {

void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count);
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     std::int64_t count, GradientWrite write = GradientWrite::accumulate);

namespace reference {

template <typename Real>
void swiglu_forward(Real* out, const Real* gate, const Real* up, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = gate[i] / (Real(1) + std::exp(-gate[i])) * up[i];
}

// Adds into dgate and dup.
template <typename Real>
void swiglu_backward(Real* dgate, Real* dup, const Real* dout, const Real* gate, const Real* up, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    const Real sigmoid = Real(1) / (Real(1) + std::exp(-gate[i]));
    dgate[i] += dout[i] * up[i] * sigmoid * (Real(1) + gate[i] * (Real(1) - sigmoid));
    dup[i] += dout[i] * gate[i] * sigmoid;
  }
}

}  // namespace reference
}  // namespace strata::cpu
