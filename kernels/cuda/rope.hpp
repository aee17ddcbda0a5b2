#pragma once
// Rotary position embedding on the device, in Hugging Face's rotate_half layout, in place on x
// (rows, n_heads, head_dim) whose rows are `stride` floats apart; row r is position r % seq_len.
// For i < head_dim/2 the pair (x_i, x_{i+head_dim/2}) of every head turns by
// position * theta^(-2i/head_dim); inverse = true turns back (the backward pass).
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::cuda {

void rope(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim,
          float theta, bool inverse);

}  // namespace strata::cuda
