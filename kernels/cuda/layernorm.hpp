#pragma once
// LayerNorm on the device. inp and out are (rows, channels); mean and rstd are (rows), kept for
// backward. Backward adds into dinp, dweight and dbias; its column sums (dweight, dbias) go through
// `workspace` (layernorm_backward_workspace_bytes of device memory) so they need no atomics.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::cuda {

void layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t channels, float eps);

std::size_t layernorm_backward_workspace_bytes(std::int64_t rows, std::int64_t channels);

void layernorm_backward(cudaStream_t stream, float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                        std::int64_t channels, void* workspace);

}  // namespace strata::cuda
