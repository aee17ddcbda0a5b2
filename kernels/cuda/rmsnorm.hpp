#pragma once
// RMSNorm (LLaMA) on the device: out = inp * rstd * g, rstd = 1 / sqrt(mean(inp^2) + eps), with the
// gain g = weight, or weight_offset + weight (Gemma).
// inp and out are (rows, channels); rstd is (rows), kept for backward. Backward adds into dinp and
// dweight; dweight's column sums go through `workspace` (rmsnorm_backward_workspace_bytes of
// device memory) so they need no atomics.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::cuda {

void rmsnorm_forward(cudaStream_t stream, float* out, float* rstd, const float* inp, const float* weight,
                     std::int64_t rows, std::int64_t channels, float eps, float weight_offset);

std::size_t rmsnorm_backward_workspace_bytes(std::int64_t rows, std::int64_t channels);

void rmsnorm_backward(cudaStream_t stream, float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t rows, std::int64_t channels,
                      float weight_offset, void* workspace);

}  // namespace strata::cuda
