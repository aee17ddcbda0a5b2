#include "kernels/cpu/gelu.hpp"

#include <algorithm>

#include "strata/cpu_clones.hpp"

namespace strata::cpu {

namespace {

// GELU is bound by tanh: each clone calls glibc's vector tanhf of its width (libmvec).
constexpr std::int64_t kChunk = 4096;

inline std::int64_t chunks(std::int64_t count) {
  return (count + kChunk - 1) / kChunk;
}

STRATA_CPU_CLONES void gelu_forward_chunk(float* out, const float* inp, std::int64_t count) {
  const float scale = std::sqrt(2.0f / std::numbers::pi_v<float>);
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(scale * (x + 0.044715f * x * x * x)));
  }
}

// d gelu(x) / dx, written out in the loop: a clone cannot inline a helper compiled for another
// instruction set, and a call per element would not vectorize.
STRATA_CPU_CLONES void gelu_backward_chunk(float* dinp, const float* inp, const float* dout, std::int64_t count,
                                           bool accumulate) {
  const float scale = std::sqrt(2.0f / std::numbers::pi_v<float>);
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = inp[i];
    const float tanh_out = std::tanh(scale * (x + 0.044715f * x * x * x));
    const float sech2 = 1.0f - tanh_out * tanh_out;
    const float slope = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech2 * scale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = accumulate ? dinp[i] + slope * dout[i] : slope * dout[i];
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::int64_t count) {
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks(count); ++c) {
    const std::int64_t begin = c * kChunk;
    gelu_forward_chunk(out + begin, inp + begin, std::min(kChunk, count - begin));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count, GradientWrite write) {
  const bool accumulate = write == GradientWrite::accumulate;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks(count); ++c) {
    const std::int64_t begin = c * kChunk;
    gelu_backward_chunk(dinp + begin, inp + begin, dout + begin, std::min(kChunk, count - begin), accumulate);
  }
}

}  // namespace strata::cpu
