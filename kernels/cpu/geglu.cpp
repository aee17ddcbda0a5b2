#include "kernels/cpu/geglu.hpp"

#include <algorithm>

#include "strata/cpu_clones.hpp"

namespace strata::cpu {

namespace {

// Bound by tanh, as GELU is: each clone calls glibc's vector tanhf of its width (libmvec), and the
// formulas are written out in the loops (a clone cannot inline a helper built for another set).
constexpr std::int64_t kChunk = 4096;

inline std::int64_t chunks(std::int64_t count) {
  return (count + kChunk - 1) / kChunk;
}

STRATA_CPU_CLONES void geglu_forward_chunk(float* out, const float* gate, const float* up, std::int64_t count) {
  const float scale = std::sqrt(2.0f / std::numbers::pi_v<float>);
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(scale * (x + 0.044715f * x * x * x))) * up[i];
  }
}

STRATA_CPU_CLONES void geglu_backward_chunk(float* dgate, float* dup, const float* dout, const float* gate,
                                            const float* up, std::int64_t count, bool accumulate) {
  const float scale = std::sqrt(2.0f / std::numbers::pi_v<float>);
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = gate[i];
    const float tanh_out = std::tanh(scale * (x + 0.044715f * x * x * x));
    const float sech2 = 1.0f - tanh_out * tanh_out;
    const float slope = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech2 * scale * (1.0f + 3.0f * 0.044715f * x * x);
    const float gelu = 0.5f * x * (1.0f + tanh_out);
    const float dgate_i = dout[i] * up[i] * slope;
    const float dup_i = dout[i] * gelu;
    // Overwriting never reads the destination, which may hold anything (NaN included).
    dgate[i] = accumulate ? dgate[i] + dgate_i : dgate_i;
    dup[i] = accumulate ? dup[i] + dup_i : dup_i;
  }
}

}  // namespace

void geglu_forward(float* out, const float* gate, const float* up, std::int64_t count) {
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks(count); ++c) {
    const std::int64_t begin = c * kChunk;
    geglu_forward_chunk(out + begin, gate + begin, up + begin, std::min(kChunk, count - begin));
  }
}

void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, std::int64_t count,
                    GradientWrite write) {
  const bool accumulate = write == GradientWrite::accumulate;
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks(count); ++c) {
    const std::int64_t begin = c * kChunk;
    geglu_backward_chunk(dgate + begin, dup + begin, dout + begin, gate + begin, up + begin,
                         std::min(kChunk, count - begin), accumulate);
  }
}

}  // namespace strata::cpu
