#pragma once
// The decoding ops (Ops::rope_at, Ops::attention_decode; strata/ops.hpp): one sequence, some new
// positions at a time, against a KV cache. rope_at turns each row by the angles rope() uses for
// its position, computed the same way in f32, so a prefill's rotations are bitwise training's.
// attention_decode appends the new keys and values to the caches, then attends with plain loops:
// decoding reads each cached key once per query, a matrix-vector product that no GEMM would speed.
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cpu {

void rope_at(float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position, int n_heads, int head_dim,
             float theta);
// rope() with given inverse frequencies, positions first_position + r % seq_len (Ops::rope_frequencies).
void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse);
void attention_decode(const DecodeShape& shape, float* out, const AttentionInputs& in, float* k_cache, float* v_cache);

}  // namespace strata::cpu
