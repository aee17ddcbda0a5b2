#pragma once
// LayerNorm over the last axis. inp and out are (N, C); mean and rstd are (N), kept for backward.
// Backward accumulates into dinp, dweight and dbias.
#include <cmath>
#include <cstdint>

namespace strata::cpu {

inline constexpr float kLayerNormEps = 1e-5f;

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       std::int64_t rows, std::int64_t channels, float eps = kLayerNormEps);
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                        std::int64_t channels);

namespace reference {

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight, const Real* bias,
                       std::int64_t rows, std::int64_t channels, Real eps = static_cast<Real>(kLayerNormEps)) {
  for (std::int64_t n = 0; n < rows; ++n) {
    const Real* x = inp + n * channels;
    Real m = 0;
    for (std::int64_t c = 0; c < channels; ++c) m += x[c];
    m /= static_cast<Real>(channels);
    Real variance = 0;
    for (std::int64_t c = 0; c < channels; ++c) variance += (x[c] - m) * (x[c] - m);
    variance /= static_cast<Real>(channels);
    const Real s = Real(1) / std::sqrt(variance + eps);
    for (std::int64_t c = 0; c < channels; ++c) out[n * channels + c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp, const Real* weight,
                        const Real* mean, const Real* rstd, std::int64_t rows, std::int64_t channels) {
  for (std::int64_t n = 0; n < rows; ++n) {
    const Real* x = inp + n * channels;
    const Real* dy = dout + n * channels;
    Real dnorm_mean = 0;
    Real dnorm_norm_mean = 0;
    for (std::int64_t c = 0; c < channels; ++c) {
      const Real norm = (x[c] - mean[n]) * rstd[n];
      const Real dnorm = weight[c] * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<Real>(channels);
    dnorm_norm_mean /= static_cast<Real>(channels);
    for (std::int64_t c = 0; c < channels; ++c) {
      const Real norm = (x[c] - mean[n]) * rstd[n];
      const Real dnorm = weight[c] * dy[c];
      dbias[c] += dy[c];
      dweight[c] += norm * dy[c];
      dinp[n * channels + c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[n];
    }
  }
}

}  // namespace reference
}  // namespace strata::cpu
