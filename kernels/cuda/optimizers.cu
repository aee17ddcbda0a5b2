// Optimizer kernels: kThreads threads per block, grid min(ceil(count / kThreads), kMaxBlocks),
// grid-stride loop, one element per step; no reductions. The per-step constants (bias
// corrections, decay, step size) are computed on the host with the CPU backend's f32 expressions
// and passed in, so only the per-element arithmetic runs on the device; AdamW's is the CPU's, bit
// for bit.
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/optimizers.hpp"
#include "strata/kernels_common.hpp"

#include <algorithm>
#include <cmath>

namespace strata::cuda {

namespace {

// The CPU kernel's own element (kernels_common.hpp), so the two give the same bits: this file
// builds with -fmad=false.
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, std::int64_t count,
                             const kernels::AdamWCoefficients c) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    kernels::adamw_element(param[i], grad[i], m[i], v[i], c);
}

__global__ void sgd_momentum_kernel(float* param, const float* grad, float* velocity, std::int64_t count, float lr,
                                    float momentum, float decay, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float velocity_new = momentum * velocity[i] + grad[i] * scale;
    velocity[i] = velocity_new;
    param[i] = param[i] * decay - lr * velocity_new;
  }
}

__global__ void sgd_kernel(float* param, const float* grad, std::int64_t count, float lr, float decay, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    param[i] = param[i] * decay - lr * grad[i] * scale;
}

}  // namespace

void adamw_update(cudaStream_t stream, float* param, const float* grad, float* m, float* v, std::int64_t count,
                  const AdamWHyper& hyper) {
  if (count <= 0) return;
  adamw_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(param, grad, m, v, count,
                                                                   kernels::adamw_coefficients(hyper));
}

void sgd_update(cudaStream_t stream, float* param, const float* grad, float* velocity, std::int64_t count,
                const SgdHyper& hyper) {
  if (count <= 0) return;
  const float decay = 1.0f - hyper.lr * hyper.weight_decay;
  if (hyper.momentum > 0.0f) {
    sgd_momentum_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(param, grad, velocity, count, hyper.lr,
                                                                            hyper.momentum, decay, hyper.grad_scale);
  } else {
    sgd_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(param, grad, count, hyper.lr, decay,
                                                                   hyper.grad_scale);
  }
}

}  // namespace strata::cuda
