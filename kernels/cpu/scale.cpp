#include "kernels/cpu/scale.hpp"

namespace strata::cpu {

void scale(float* values, float factor, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) values[i] *= factor;
}

}  // namespace strata::cpu
