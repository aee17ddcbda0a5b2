#pragma once
// Causal flash attention on the CUDA backend's stream (the FlashAttention-2 algorithm): tiles of
// 64 queries meet tiles of 64 keys, the softmax runs online, and the backward pass recomputes each
// score tile. Semantics as plugins/flash_attention/cpu/flash_attention_cpu.hpp: q is
// (N, n_head, D) and k, v are (N, n_kv_head, D), rows `stride` floats apart; query head h reads
// key/value head h / (n_head / n_kv_head); out is (N, n_head * D) contiguous; scale 1/sqrt(D).
// Exact f32 arithmetic (fmaf), deterministic bit for bit: no atomics, fixed launch shapes and
// sum orders.
//
// The forward pass keeps the log-sum-exp of every score row, `lse` (B, n_head, T): O(T) memory
// instead of the built-in kernel's (B, n_head, T, T) probabilities. The backward pass reads the
// forward's output `out` (the model keeps it); `scratch` holds rowsum(dout ⊙ out) per score row
// (B, n_head, T). Backward adds into dq, dk, dv. All pointers are device memory; the functions
// only launch (the caller checks cudaGetLastError).
//
// Head dims 64 and 128 only; head dim 128's backward needs 218 KiB of shared memory per block
// (sm_90; an A100's 163 KiB is not enough), which supports() asks the current device about.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "strata/ops.hpp"

namespace strata::flash::cuda {

bool supports(const AttentionShape& shape);
std::int64_t lse_floats(const AttentionShape& shape);
std::int64_t scratch_floats(const AttentionShape& shape);

// Both launch nothing and return false for a shape supports() refuses.
bool forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in);
bool backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
              const float* out, const AttentionInputs& in, const float* lse, float* scratch);

}  // namespace strata::flash::cuda
