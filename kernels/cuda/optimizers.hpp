#pragma once
// Optimizer updates on the device, in place over `count` floats, with the CPU backend's formulas:
// AdamW with bias correction and decoupled weight decay; SGD with optional momentum (velocity is
// null, and never read, when momentum is 0). Gradients are multiplied by grad_scale first.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "strata/ops.hpp"

namespace strata::cuda {

void adamw_update(cudaStream_t stream, float* param, const float* grad, float* m, float* v, std::int64_t count,
                  const AdamWHyper& hyper);
void sgd_update(cudaStream_t stream, float* param, const float* grad, float* velocity, std::int64_t count,
                const SgdHyper& hyper);

}  // namespace strata::cuda
