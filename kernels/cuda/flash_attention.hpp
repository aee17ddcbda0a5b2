#pragma once
// Causal attention for the CUDA backend that never materializes the (T, T) scores: tiles of 64
// queries meet tiles of 64 keys, the softmax runs online, and the backward pass recomputes each
// score tile. Semantics as kernels/cpu/attention.hpp: q is (N, n_head, D) and k, v are
// (N, n_kv_head, D), rows `stride` floats apart; query head h reads key/value head
// h / (n_head / n_kv_head); out is (N, n_head * D) contiguous; scale is 1/sqrt(D). Exact f32
// arithmetic (fmaf), deterministic bit for bit: no atomics, fixed launch shapes and sum orders.
//
// `saved` holds a copy of out (B, T, n_head, D) followed by the log-sum-exp of every score row
// (B, n_head, T): O(T) memory instead of the baseline's (B, n_head, T, T) probabilities.
// `scratch` holds rowsum(dout ⊙ out) per score row (B, n_head, T). Backward adds into dq, dk, dv.
// Only head dims 64 and 128 are supported; head dim 128 backward needs 218 KiB of shared memory
// per block (sm_90).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "strata/ops.hpp"

namespace strata::cuda {

bool flash_attention_supports(const AttentionShape& shape);
std::int64_t flash_attention_saved_floats(const AttentionShape& shape);
std::int64_t flash_attention_scratch_floats(const AttentionShape& shape);

void flash_attention_forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* saved,
                             const AttentionInputs& in);
void flash_attention_backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads,
                              const float* dout, const AttentionInputs& in, const float* saved, float* scratch);

}  // namespace strata::cuda
