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
//
// Operands::bf16 runs the same algorithm on the tensor cores (flash_attention_tensor_cores.hpp):
// bf16 operands, f32 accumulation and softmax, deterministic too; it needs sm_80 or later and 55
// KiB (head dim 64) or 103 KiB (128) of shared memory per block, and a larger backward scratch
// (tensor_core_scratch.hpp: bf16 copies of q, k, v and dout).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "strata/ops.hpp"

namespace strata::flash::cuda {

// The products' operands: f32 (exact, on the CUDA cores) or bf16 (on the tensor cores).
enum class Operands { f32, bf16 };

bool supports(const AttentionShape& shape, Operands operands = Operands::f32);
std::int64_t lse_floats(const AttentionShape& shape);
std::int64_t scratch_floats(const AttentionShape& shape, Operands operands = Operands::f32);

// Both launch nothing and return false for a shape supports() refuses.
bool forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in,
             Operands operands = Operands::f32);
bool backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
              const float* out, const AttentionInputs& in, const float* lse, float* scratch,
              Operands operands = Operands::f32);

}  // namespace strata::flash::cuda
