#pragma once
// Ops::attention_decode on the GPU (strata/ops.hpp; rope_at and rope_frequencies are rope.cu's).
// It copies the new keys and values into the caches (cudaMemcpy2DAsync: strided
// rows in, contiguous rows out), then runs one warp per (query row, head): the lanes split the head
// dimension (head_dim <= 256), and the warp walks the cached positions in order with an online
// softmax (running max and sum), so nothing of size T is stored. Throws std::runtime_error for a
// head_dim above 256.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cuda {

void attention_decode(cudaStream_t stream, const DecodeShape& shape, float* out, const AttentionInputs& in,
                      float* k_cache, float* v_cache);

}  // namespace strata::cuda
