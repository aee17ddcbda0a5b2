#pragma once
// Ops::attention_decode (strata/ops.hpp): one sequence, some new positions at a time, against a KV
// cache (rope_at and rope_frequencies are rope.hpp's). attention_decode appends the new keys and values to the caches,
// then attends with plain loops: decoding reads each cached key once per query, a matrix-vector product that no GEMM
// would speed.
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cpu {

void attention_decode(const DecodeShape& shape, float* out, const AttentionInputs& in, float* k_cache, float* v_cache);

}  // namespace strata::cpu
