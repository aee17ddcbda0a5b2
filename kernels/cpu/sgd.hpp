#pragma once
// SGD with optional momentum and decoupled weight decay, in place:
//   decay = 1 - lr * weight_decay, g = grad * grad_scale
//   momentum > 0: velocity = momentum * velocity + g; param = param * decay - lr * velocity
//   momentum = 0: param = param * decay - lr * g   (velocity is not read and may be null)
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cpu {

void sgd_update(float* param, const float* grad, float* velocity, std::int64_t count, const SgdHyper& hyper);

namespace reference {

template <typename Real>
void sgd_update(Real* param, const Real* grad, Real* velocity, std::int64_t count, const SgdHyper& hyper) {
  const Real lr = hyper.lr, momentum = hyper.momentum, scale = hyper.grad_scale;
  const Real decay = Real(1) - lr * static_cast<Real>(hyper.weight_decay);
  for (std::int64_t i = 0; i < count; ++i) {
    if (momentum > Real(0)) {
      velocity[i] = momentum * velocity[i] + grad[i] * scale;
      param[i] = param[i] * decay - lr * velocity[i];
    } else {
      param[i] = param[i] * decay - lr * grad[i] * scale;
    }
  }
}

}  // namespace reference

}  // namespace strata::cpu
