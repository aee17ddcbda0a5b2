#include "kernels/cpu/gelu.hpp"

namespace strata::cpu {

void gelu_forward(float* out, const float* inp, std::int64_t count) {
  const float scale = std::sqrt(2.0f / std::numbers::pi_v<float>);
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(scale * (x + 0.044715f * x * x * x)));
  }
}

namespace {

// d gelu(x) / dx
inline float gelu_slope(float x, float scale) {
  const float tanh_out = std::tanh(scale * (x + 0.044715f * x * x * x));
  const float sech2 = 1.0f - tanh_out * tanh_out;
  return 0.5f * (1.0f + tanh_out) + x * 0.5f * sech2 * scale * (1.0f + 3.0f * 0.044715f * x * x);
}

}  // namespace

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count, GradientWrite write) {
  const float scale = std::sqrt(2.0f / std::numbers::pi_v<float>);
  if (write == GradientWrite::accumulate) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) dinp[i] += gelu_slope(inp[i], scale) * dout[i];
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) dinp[i] = gelu_slope(inp[i], scale) * dout[i];
  }
}

}  // namespace strata::cpu
