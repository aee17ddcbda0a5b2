#include "kernels/cpu/rmsnorm.hpp"

#include "strata/kernels_common.hpp"

namespace strata::cpu {

namespace {

// The gain g_c: the weight itself (kOffset false: the weight read directly, so no zero's sign can
// change), or weight_offset + weight.
template <bool kOffset>
inline float gain(const float* weight, float offset, std::int64_t c) {
  if constexpr (kOffset)
    return offset + weight[c];
  else
    return weight[c];
}

template <bool kOffset>
void forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows, std::int64_t channels,
             float eps, float offset) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* x = inp + n * channels;
    float* y = out + n * channels;
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (std::int64_t c = 0; c < channels; ++c) squares += x[c] * x[c];
    const float r = 1.0f / std::sqrt(squares / static_cast<float>(channels) + eps);
#pragma omp simd
    for (std::int64_t c = 0; c < channels; ++c) y[c] = x[c] * r * gain<kOffset>(weight, offset, c);
    rstd[n] = r;
  }
}

// dinp: independent per row.
template <bool kOffset>
void input_gradient(float* dinp, const float* dout, const float* inp, const float* weight, const float* rstd,
                    std::int64_t rows, std::int64_t channels, float offset) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* x = inp + n * channels;
    const float* dy = dout + n * channels;
    float* dx = dinp + n * channels;
    const float r = rstd[n];
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (std::int64_t c = 0; c < channels; ++c) dot += gain<kOffset>(weight, offset, c) * dy[c] * x[c];
    const float correction = r * r * r * dot / static_cast<float>(channels);
#pragma omp simd
    for (std::int64_t c = 0; c < channels; ++c)
      dx[c] += r * gain<kOffset>(weight, offset, c) * dy[c] - correction * x[c];
  }
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                     std::int64_t channels, float eps, float weight_offset) {
  if (weight_offset == 0.0f)
    forward<false>(out, rstd, inp, weight, rows, channels, eps, weight_offset);
  else
    forward<true>(out, rstd, inp, weight, rows, channels, eps, weight_offset);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, std::int64_t rows, std::int64_t channels, float weight_offset) {
  if (weight_offset == 0.0f)
    input_gradient<false>(dinp, dout, inp, weight, rstd, rows, channels, weight_offset);
  else
    input_gradient<true>(dinp, dout, inp, weight, rstd, rows, channels, weight_offset);
  // dweight sums over rows, the same whatever the thread count.
  kernels::sum_rows_by_column_blocks(
      rows, channels, [=](std::int64_t n, std::int64_t begin, std::int64_t end) __attribute__((always_inline)) {
        const float* x = inp + n * channels;
        const float* dy = dout + n * channels;
        const float r = rstd[n];
#pragma omp simd
        for (std::int64_t c = begin; c < end; ++c) dweight[c] += dy[c] * x[c] * r;
      });
}

}  // namespace strata::cpu
