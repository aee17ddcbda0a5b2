#pragma once
// GELU, tanh approximation (GPT-2). inp and out are (N). Backward accumulates into dinp unless
// told to overwrite it.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "strata/ops.hpp"

namespace strata::cpu {

void gelu_forward(float* out, const float* inp, std::int64_t count);
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count,
                   GradientWrite write = GradientWrite::accumulate);

namespace reference {

template <typename Real>
void gelu_forward(Real* out, const Real* inp, std::int64_t count) {
  const Real scale = std::sqrt(Real(2) / std::numbers::pi_v<Real>);
  for (std::int64_t i = 0; i < count; ++i) {
    const Real x = inp[i];
    out[i] = Real(0.5) * x * (Real(1) + std::tanh(scale * (x + Real(0.044715) * x * x * x)));
  }
}

template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, std::int64_t count) {
  const Real scale = std::sqrt(Real(2) / std::numbers::pi_v<Real>);
  for (std::int64_t i = 0; i < count; ++i) {
    const Real x = inp[i];
    const Real tanh_out = std::tanh(scale * (x + Real(0.044715) * x * x * x));
    const Real sech2 = Real(1) - tanh_out * tanh_out;
    const Real local =
        Real(0.5) * (Real(1) + tanh_out) + x * Real(0.5) * sech2 * scale * (Real(1) + Real(3) * Real(0.044715) * x * x);
    dinp[i] += local * dout[i];
  }
}

}  // namespace reference
}  // namespace strata::cpu
