#pragma once
// Elementwise arithmetic on the device for optimizers written against the op table
// (strata/ops.hpp gives each formula): sign, product, quotient with an epsilon, square root, each
// correctly rounded (the _rn intrinsics), so the bits match the CPU backend's. Outputs may alias
// inputs.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::cuda {

void sign(cudaStream_t stream, float* out, const float* x, std::int64_t count);
void mul(cudaStream_t stream, float* out, const float* a, const float* b, std::int64_t count);
void div(cudaStream_t stream, float* out, const float* a, const float* b, float eps, std::int64_t count);
void sqrt(cudaStream_t stream, float* out, const float* x, std::int64_t count);

}  // namespace strata::cuda
