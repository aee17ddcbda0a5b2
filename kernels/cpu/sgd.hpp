#pragma once
// SGD with optional momentum and decoupled weight decay, in place:
//   decay = 1 - lr * weight_decay, g = grad * grad_scale
//   momentum > 0: velocity = momentum * velocity + g; param = param * decay - lr * velocity
//   momentum = 0: param = param * decay - lr * g   (velocity is not read and may be null)
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cpu {

void sgd_update(float* param, const float* grad, float* velocity, std::int64_t count, const SgdHyper& hyper);

}  // namespace strata::cpu
