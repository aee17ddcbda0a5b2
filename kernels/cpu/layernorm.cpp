#include "kernels/cpu/layernorm.hpp"

#include "strata/kernels_common.hpp"

namespace strata::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       std::int64_t rows, std::int64_t channels, float eps) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* x = inp + n * channels;
    float* y = out + n * channels;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = 0; c < channels; ++c) sum += x[c];
    const float m = sum / static_cast<float>(channels);
    float square_sum = 0.0f;
#pragma omp simd reduction(+ : square_sum)
    for (std::int64_t c = 0; c < channels; ++c) square_sum += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(square_sum / static_cast<float>(channels) + eps);
#pragma omp simd
    for (std::int64_t c = 0; c < channels; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                        std::int64_t channels) {
  // dinp: independent per row.
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* x = inp + n * channels;
    const float* dy = dout + n * channels;
    const float m = mean[n];
    const float s = rstd[n];
    float dnorm_sum = 0.0f;
    float dnorm_norm_sum = 0.0f;
#pragma omp simd reduction(+ : dnorm_sum, dnorm_norm_sum)
    for (std::int64_t c = 0; c < channels; ++c) {
      const float dnorm = weight[c] * dy[c];
      dnorm_sum += dnorm;
      dnorm_norm_sum += dnorm * (x[c] - m) * s;
    }
    const float dnorm_mean = dnorm_sum / static_cast<float>(channels);
    const float dnorm_norm_mean = dnorm_norm_sum / static_cast<float>(channels);
    float* dx = dinp + n * channels;
#pragma omp simd
    for (std::int64_t c = 0; c < channels; ++c) {
      const float norm = (x[c] - m) * s;
      dx[c] += (weight[c] * dy[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
  // dweight and dbias: a reduction over rows, the same whatever the thread count.
  kernels::sum_rows_by_column_blocks(
      rows, channels, [=](std::int64_t n, std::int64_t begin, std::int64_t end) __attribute__((always_inline)) {
        const float* x = inp + n * channels;
        const float* dy = dout + n * channels;
        const float m = mean[n];
        const float s = rstd[n];
#pragma omp simd
        for (std::int64_t c = begin; c < end; ++c) {
          dbias[c] += dy[c];
          dweight[c] += (x[c] - m) * s * dy[c];
        }
      });
}

}  // namespace strata::cpu
