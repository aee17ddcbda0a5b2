#pragma once
// The decoding ops on the GPU (strata/ops.hpp: rope_at, attention_decode). rope_at is rope.cu's
// rotation at an offset position, its inverse frequencies computed on the host as the CPU does.
// attention_decode copies the new keys and values into the caches (cudaMemcpy2DAsync: strided
// rows in, contiguous rows out), then runs one warp per (query row, head): the lanes split the head
// dimension (head_dim <= 256), and the warp walks the cached positions in order with an online
// softmax (running max and sum), so nothing of size T is stored. Throws std::runtime_error for a
// head_dim above 256.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cuda {

void rope_at(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position,
             int n_heads, int head_dim, float theta);
void rope_frequencies(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse);
void attention_decode(cudaStream_t stream, const DecodeShape& shape, float* out, const AttentionInputs& in,
                      float* k_cache, float* v_cache);

}  // namespace strata::cuda
