// Grid-stride loops, 256 threads a block, at most 65536 blocks; no reductions. The decay is
// computed on the host with the CPU's f32 expression.
#include "cuda/sgd_cuda.hpp"

namespace strata::sgd::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

__global__ void momentum_kernel(float* param, const float* grad, float* velocity, std::int64_t count, float lr,
                                float momentum, float decay, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float velocity_new = momentum * velocity[i] + grad[i] * scale;
    velocity[i] = velocity_new;
    param[i] = param[i] * decay - lr * velocity_new;
  }
}

__global__ void plain_kernel(float* param, const float* grad, std::int64_t count, float lr, float decay, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    param[i] = param[i] * decay - lr * grad[i] * scale;
}

}  // namespace

void update(cudaStream_t stream, float* param, const float* grad, float* velocity, std::int64_t count,
            const SgdHyper& hyper) {
  if (count <= 0) return;
  const float decay = 1.0f - hyper.lr * hyper.weight_decay;
  if (hyper.momentum > 0.0f)
    momentum_kernel<<<blocks_for(count), kThreads, 0, stream>>>(param, grad, velocity, count, hyper.lr, hyper.momentum,
                                                                decay, hyper.grad_scale);
  else
    plain_kernel<<<blocks_for(count), kThreads, 0, stream>>>(param, grad, count, hyper.lr, decay, hyper.grad_scale);
}

}  // namespace strata::sgd::cuda
