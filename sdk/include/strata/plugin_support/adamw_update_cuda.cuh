#pragma once
// AdamW's f32 update over one tensor on a CUDA stream: the host's element (adamw_element,
// strata/kernels_common.hpp) in a grid-stride loop, 256 threads a block, at most 65536 blocks; no
// reductions. The per-step constants are computed on the host with the CPU's f32 expressions. Build
// the .cu that includes this with -fmad=false: the kernel then gives the host loop's bits
// (adamw_update.hpp). Internal linkage: each library compiles its own copy.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "strata/kernels_common.hpp"

namespace strata::plugin_support {

static __global__ void adamw_update_kernel(float* param, const float* grad, float* m, float* v, std::int64_t count,
                                           const kernels::AdamWCoefficients c) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    kernels::adamw_element(param[i], grad[i], m[i], v[i], c);
}

// Launches the update on `stream`; the caller checks cudaGetLastError.
[[maybe_unused]] static void adamw_update_f32_cuda(cudaStream_t stream, float* param, const float* grad, float* m,
                                                   float* v, std::int64_t count, const AdamWHyper& hyper) {
  if (count <= 0) return;
  constexpr int kThreads = 256;
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  adamw_update_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(
      param, grad, m, v, count, kernels::adamw_coefficients(hyper));
}

}  // namespace strata::plugin_support
