#include "kernels/cpu/swiglu.hpp"

namespace strata::cpu {

void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     std::int64_t count, GradientWrite write) {
  // Overwriting never reads the destination, which may hold anything (NaN included).
  const bool accumulate = write == GradientWrite::accumulate;
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const float sigmoid = 1.0f / (1.0f + std::exp(-gate[i]));
    const float dgate_i = dout[i] * up[i] * sigmoid * (1.0f + gate[i] * (1.0f - sigmoid));
    const float dup_i = dout[i] * gate[i] * sigmoid;
    dgate[i] = accumulate ? dgate[i] + dgate_i : dgate_i;
    dup[i] = accumulate ? dup[i] + dup_i : dup_i;
  }
}

}  // namespace strata::cpu
