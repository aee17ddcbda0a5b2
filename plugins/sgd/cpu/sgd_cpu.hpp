#pragma once
// SGD's update on the host's cores, in place, with optional momentum and decoupled weight decay:
//   decay = 1 - lr * weight_decay, g = grad * grad_scale
//   momentum > 0: velocity = momentum * velocity + g; param = param * decay - lr * velocity
//   momentum = 0: param = param * decay - lr * g   (velocity is not read and may be null)
// Compiled without contraction: the CUDA kernel (cuda/sgd_cuda.hpp) gives the same bits.
#include <cstdint>

#include "strata/op_records.hpp"

namespace strata::sgd::cpu {

void update(float* param, const float* grad, float* velocity, std::int64_t count, const SgdHyper& hyper);

namespace reference {

template <typename Real>
void update(Real* param, const Real* grad, Real* velocity, std::int64_t count, const SgdHyper& hyper) {
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
}  // namespace strata::sgd::cpu
