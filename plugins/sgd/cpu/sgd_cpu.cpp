#include "cpu/sgd_cpu.hpp"

namespace strata::sgd::cpu {

void update(float* param, const float* grad, float* velocity, std::int64_t count, const SgdHyper& hyper) {
  const float lr = hyper.lr, momentum = hyper.momentum, scale = hyper.grad_scale;
  const float decay = 1.0f - lr * hyper.weight_decay;
  if (momentum > 0.0f) {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      velocity[i] = momentum * velocity[i] + grad[i] * scale;
      param[i] = param[i] * decay - lr * velocity[i];
    }
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) param[i] = param[i] * decay - lr * grad[i] * scale;
  }
}

}  // namespace strata::sgd::cpu
