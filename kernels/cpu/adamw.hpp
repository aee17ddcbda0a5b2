#pragma once
// AdamW (decoupled weight decay, bias correction), in place, PyTorch's order of operations:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   param *= 1 - lr wd; param -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
#include <cmath>
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cpu {

void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count, const AdamWHyper& hyper);

namespace reference {

template <typename Real>
void adamw_update(Real* param, const Real* grad, Real* m, Real* v, std::int64_t count, const AdamWHyper& hyper) {
  const Real b1 = hyper.beta1;
  const Real b2 = hyper.beta2;
  const Real correction1 = Real(1) - std::pow(b1, static_cast<Real>(hyper.step));
  const Real correction2 = Real(1) - std::pow(b2, static_cast<Real>(hyper.step));
  for (std::int64_t i = 0; i < count; ++i) {
    const Real g = grad[i] * static_cast<Real>(hyper.grad_scale);
    m[i] = b1 * m[i] + (Real(1) - b1) * g;
    v[i] = b2 * v[i] + (Real(1) - b2) * g * g;
    param[i] *= Real(1) - static_cast<Real>(hyper.lr) * static_cast<Real>(hyper.weight_decay);
    param[i] -= static_cast<Real>(hyper.lr) * (m[i] / correction1) /
                (std::sqrt(v[i] / correction2) + static_cast<Real>(hyper.eps));
  }
}

}  // namespace reference
}  // namespace strata::cpu
