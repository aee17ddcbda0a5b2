#include "kernels/cpu/residual.hpp"

namespace strata::cpu {

void residual_forward(float* out, const float* a, const float* b, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

}  // namespace strata::cpu
