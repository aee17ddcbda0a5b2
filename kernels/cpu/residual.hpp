#pragma once
// Residual add: out = a + b, all (N). Backward accumulates dout into da and db.
#include <cstdint>

namespace strata::cpu {

void residual_forward(float* out, const float* a, const float* b, std::int64_t count);
void residual_backward(float* da, float* db, const float* dout, std::int64_t count);

namespace reference {

template <typename Real>
void residual_forward(Real* out, const Real* a, const Real* b, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

template <typename Real>
void residual_backward(Real* da, Real* db, const Real* dout, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

}  // namespace reference
}  // namespace strata::cpu
