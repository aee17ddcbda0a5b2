#pragma once
// Pointwise ops on the device, over `count` contiguous floats: GELU (tanh approximation), SwiGLU
// (out = silu(gate) * up), GeGLU (out = gelu(gate) * up), the residual sum and scale (values *= factor, in place).
// Backward writes per GradientWrite: overwrite never reads the destination.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "strata/ops.hpp"

namespace strata::cuda {

void gelu_forward(cudaStream_t stream, float* out, const float* inp, std::int64_t count);
void gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout, std::int64_t count,
                   GradientWrite write);
void swiglu_forward(cudaStream_t stream, float* out, const float* gate, const float* up, std::int64_t count);
void swiglu_backward(cudaStream_t stream, float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, std::int64_t count, GradientWrite write);
void geglu_forward(cudaStream_t stream, float* out, const float* gate, const float* up, std::int64_t count);
void geglu_backward(cudaStream_t stream, float* dgate, float* dup, const float* dout, const float* gate,
                    const float* up, std::int64_t count, GradientWrite write);
void residual_forward(cudaStream_t stream, float* out, const float* a, const float* b, std::int64_t count);
void scale(cudaStream_t stream, float* values, float factor, std::int64_t count);
void add_scaled(cudaStream_t stream, float* y, float alpha, const float* x, std::int64_t count);

}  // namespace strata::cuda
