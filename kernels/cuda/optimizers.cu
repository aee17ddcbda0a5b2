// Optimizer kernels: kThreads threads per block, grid min(ceil(count / kThreads), kMaxBlocks),
// grid-stride loop, one element per step; no reductions. The per-step constants (bias
// corrections, decay, step size) are computed on the host with the CPU backend's f32 expressions
// and passed in, so only the per-element arithmetic runs on the device.
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/optimizers.hpp"

#include <algorithm>
#include <cmath>

namespace strata::cuda {

namespace {

struct AdamWStep {
  float beta1;
  float beta2;
  float eps;
  float inverse_sqrt_correction2;
  float decay;
  float step_size;
  float grad_scale;
};

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, std::int64_t count,
                             const AdamWStep step) {
  const float b1 = step.beta1;
  const float b2 = step.beta2;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i] * step.grad_scale;
    const float m_new = b1 * m[i] + (1.0f - b1) * g;
    const float v_new = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = m_new;
    v[i] = v_new;
    const float denominator = sqrtf(v_new) * step.inverse_sqrt_correction2 + step.eps;
    param[i] = param[i] * step.decay - step.step_size * m_new / denominator;
  }
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
  AdamWStep step{};
  step.beta1 = hyper.beta1;
  step.beta2 = hyper.beta2;
  step.eps = hyper.eps;
  const float inverse_correction1 = 1.0f / (1.0f - std::pow(hyper.beta1, static_cast<float>(hyper.step)));
  step.inverse_sqrt_correction2 = 1.0f / std::sqrt(1.0f - std::pow(hyper.beta2, static_cast<float>(hyper.step)));
  step.decay = 1.0f - hyper.lr * hyper.weight_decay;
  step.step_size = hyper.lr * inverse_correction1;
  step.grad_scale = hyper.grad_scale;
  adamw_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(param, grad, m, v, count, step);
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
