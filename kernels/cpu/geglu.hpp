#pragma once
// GeGLU's gate (Gemma): out = gelu(gate) * up with GELU's tanh approximation. Backward:
//   dgate = dout * up * gelu'(gate),  dup = dout * gelu(gate)
// written or added per `write`.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "strata/ops.hpp"

namespace strata::cpu {

void geglu_forward(float* out, const float* gate, const float* up, std::int64_t count);
void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, std::int64_t count,
                    GradientWrite write = GradientWrite::accumulate);

namespace reference {

template <typename Real>
Real gelu_tanh(Real x) {
  const Real scale = std::sqrt(Real(2) / std::numbers::pi_v<Real>);
  return Real(0.5) * x * (Real(1) + std::tanh(scale * (x + Real(0.044715) * x * x * x)));
}

template <typename Real>
Real gelu_tanh_slope(Real x) {
  const Real scale = std::sqrt(Real(2) / std::numbers::pi_v<Real>);
  const Real tanh_out = std::tanh(scale * (x + Real(0.044715) * x * x * x));
  const Real sech2 = Real(1) - tanh_out * tanh_out;
  return Real(0.5) * (Real(1) + tanh_out) +
         x * Real(0.5) * sech2 * scale * (Real(1) + Real(3) * Real(0.044715) * x * x);
}

template <typename Real>
void geglu_forward(Real* out, const Real* gate, const Real* up, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

// Adds into dgate and dup.
template <typename Real>
void geglu_backward(Real* dgate, Real* dup, const Real* dout, const Real* gate, const Real* up, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    dgate[i] += dout[i] * up[i] * gelu_tanh_slope(gate[i]);
    dup[i] += dout[i] * gelu_tanh(gate[i]);
  }
}

}  // namespace reference
}  // namespace strata::cpu
