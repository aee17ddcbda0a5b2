#include "kernels/cpu/scale.hpp"

namespace strata::cpu {

void scale(float* values, float factor, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) values[i] *= factor;
}

void add_scaled(float* y, float alpha, const float* x, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) y[i] += alpha * x[i];
}

}  // namespace strata::cpu
