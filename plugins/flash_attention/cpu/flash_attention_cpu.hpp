#pragma once
// Causal flash attention on the CPU (the FlashAttention-2 algorithm): tiles of queries meet tiles
// of keys, the softmax runs online, and the (T, T) scores never exist in memory. Semantics as
// kernels/cpu/attention.hpp: q is (N, n_head, D) and k, v are (N, n_kv_head, D), rows `stride`
// floats apart; query head h reads key/value head h / (n_head / n_kv_head); out is
// (N, n_head * D) contiguous; scale is 1/sqrt(D).
//
// The forward pass keeps only the log-sum-exp of every score row, `lse` (B, n_head, T): O(T)
// instead of the built-in kernel's (B, n_head, T, T) probabilities. The backward pass recomputes
// each score tile from q, k and lse, and reads the forward's output `out` (which the model keeps
// as the input of the attention projection). `scratch` (scratch_floats) holds rowsum(dout ⊙ out)
// per score row and, under grouped-query attention, each query head's partial dk and dv rows
// (O(T) too). Backward adds into dq, dk, dv; it runs one task per (batch, query head).
//
// Deterministic bit for bit, whatever the thread count: every output element is summed by one
// task in a fixed order (a group's partial dk, dv rows in head order).
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::flash::cpu {

std::int64_t lse_floats(const AttentionShape& shape);
std::int64_t scratch_floats(const AttentionShape& shape);

void forward(const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in);
void backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout, const float* out,
              const AttentionInputs& in, const float* lse, float* scratch);

}  // namespace strata::flash::cpu
