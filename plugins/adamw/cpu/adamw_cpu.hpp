#pragma once
// AdamW's update on the host's cores (AdamWHyper's formula, strata/op_records.hpp), in place:
//   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//   param *= 1 - lr wd; param -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
// The loop is strata/plugin_support/adamw_update.hpp's, compiled here without contraction: the CUDA
// kernel (cuda/adamw_cuda.hpp) gives the same bits, so the host may update offloaded rows of a CUDA
// run with it.
#include <cmath>
#include <cstdint>

#include "strata/op_records.hpp"

namespace strata::adamw::cpu {

void update(float* param, const float* grad, float* m, float* v, std::int64_t count, const AdamWHyper& hyper);

namespace reference {

// PyTorch's order of operations in any Real type (double for the tests).
template <typename Real>
void update(Real* param, const Real* grad, Real* m, Real* v, std::int64_t count, const AdamWHyper& hyper) {
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
}  // namespace strata::adamw::cpu
