#pragma once
// RMSNorm as LLaMA computes it: out = inp * rstd * g, rstd = 1 / sqrt(mean(inp^2) + eps), per row of
// `channels`, with the gain g = weight (LLaMA) or weight_offset + weight (Gemma's 1 + w); rstd
// (rows) is kept for backward. Backward adds into dinp and dweight:
//   dweight_c += dout_c * x_c * rstd
//   dinp_c    += rstd * g_c * dout_c - rstd^3 * x_c * (sum_j g_j dout_j x_j) / channels
#include <cmath>
#include <cstdint>

namespace strata::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                     std::int64_t channels, float eps, float weight_offset = 0.0f);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, std::int64_t rows, std::int64_t channels, float weight_offset = 0.0f);

namespace reference {

template <typename Real>
void rmsnorm_forward(Real* out, Real* rstd, const Real* inp, const Real* weight, std::int64_t rows,
                     std::int64_t channels, double eps, double weight_offset = 0.0) {
  for (std::int64_t n = 0; n < rows; ++n) {
    const Real* x = inp + n * channels;
    Real squares = 0;
    for (std::int64_t c = 0; c < channels; ++c) squares += x[c] * x[c];
    const Real r = Real(1) / std::sqrt(squares / static_cast<Real>(channels) + static_cast<Real>(eps));
    for (std::int64_t c = 0; c < channels; ++c)
      out[n * channels + c] = x[c] * r * (static_cast<Real>(weight_offset) + weight[c]);
    rstd[n] = r;
  }
}

template <typename Real>
void rmsnorm_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp, const Real* weight,
                      const Real* rstd, std::int64_t rows, std::int64_t channels, double weight_offset = 0.0) {
  const Real offset = static_cast<Real>(weight_offset);
  for (std::int64_t n = 0; n < rows; ++n) {
    const Real* x = inp + n * channels;
    const Real* dy = dout + n * channels;
    const Real r = rstd[n];
    Real dot = 0;
    for (std::int64_t c = 0; c < channels; ++c) dot += (offset + weight[c]) * dy[c] * x[c];
    for (std::int64_t c = 0; c < channels; ++c) {
      dweight[c] += dy[c] * x[c] * r;
      dinp[n * channels + c] += r * (offset + weight[c]) * dy[c] - r * r * r * x[c] * dot / static_cast<Real>(channels);
    }
  }
}

}  // namespace reference
}  // namespace strata::cpu
