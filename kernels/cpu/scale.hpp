#pragma once
// values *= factor, in place (a precision policy unscales gradients with it), and y += alpha * x
// (a phase controller's predicted update).
#include <cstdint>

namespace strata::cpu {

void scale(float* values, float factor, std::int64_t count);
void add_scaled(float* y, float alpha, const float* x, std::int64_t count);

namespace reference {

template <typename Real>
void scale(Real* values, Real factor, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) values[i] *= factor;
}

template <typename Real>
void add_scaled(Real* y, Real alpha, const Real* x, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) y[i] += alpha * x[i];
}

}  // namespace reference
}  // namespace strata::cpu
