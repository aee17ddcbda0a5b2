#pragma once
// values *= factor, in place (a precision policy unscales gradients with it).
#include <cstdint>

namespace strata::cpu {

void scale(float* values, float factor, std::int64_t count);

namespace reference {

template <typename Real>
void scale(Real* values, Real factor, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) values[i] *= factor;
}

}  // namespace reference
}  // namespace strata::cpu
