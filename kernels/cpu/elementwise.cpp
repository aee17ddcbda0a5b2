#include "kernels/cpu/elementwise.hpp"

#include <cmath>

namespace strata::cpu {

void sign(float* out, const float* x, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    // NaN compares false both ways and passes through as v.
    out[i] = v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : (v == 0.0f ? 0.0f : v));
  }
}

void mul(float* out, const float* a, const float* b, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) out[i] = a[i] * b[i];
}

void div(float* out, const float* a, const float* b, float eps, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) out[i] = a[i] / (b[i] + eps);
}

void sqrt(float* out, const float* x, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) out[i] = std::sqrt(x[i]);
}

}  // namespace strata::cpu
