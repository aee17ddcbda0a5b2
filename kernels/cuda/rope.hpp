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
// Decoding: rows at positions first_position + r (Ops::rope_at).
void rope_at(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position,
             int n_heads, int head_dim, float theta);
// Given inverse frequencies (host memory, head_dim / 2 <= 512), positions first_position + r % seq_len
// (Ops::rope_frequencies). Throws std::runtime_error for a wider head.
void rope_frequencies(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse);
// Each row at its given position ((rows) in device memory: packed documents), with theta's
// frequencies or the given ones (host memory, head_dim / 2 <= 512).
void rope_positions(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride,
                    const std::int32_t* positions, int n_heads, int head_dim, float theta,
                    const float* inverse_frequencies, bool inverse);

}  // namespace strata::cuda
