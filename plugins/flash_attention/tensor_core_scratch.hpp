#pragma once
// The backward scratch of the tensor-core kernels (`flash_bf16` on CUDA), in floats: the delta
// rows every flash backward keeps (rowsum(dout ⊙ out), B x n_head x T), padded to 256 bytes, then
// bf16 copies of q, k, v and dout, which the backward kernels' tile loads copy straight into
// shared memory (cp.async) instead of rounding f32 rows on every visit. Here, not in the CUDA
// sources, so that a build without nvcc plans the same memory.
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::flash {

// Where the bf16 copies start in the scratch, in floats (a multiple of 64: 256-byte aligned).
inline std::int64_t tensor_core_copies_offset(const AttentionShape& shape) {
  const std::int64_t delta = static_cast<std::int64_t>(shape.batch) * shape.n_head * shape.seq_len;
  return (delta + 63) / 64 * 64;
}

// q and dout are (N, n_head, D), k and v (N, n_kv_head, D), each contiguous, in bf16: two bf16 per float.
inline std::int64_t tensor_core_scratch_floats(const AttentionShape& shape) {
  const std::int64_t rows = static_cast<std::int64_t>(shape.batch) * shape.seq_len;
  return tensor_core_copies_offset(shape) + rows * shape.head_dim * (shape.n_head + shape.n_kv_head);
}

}  // namespace strata::flash
