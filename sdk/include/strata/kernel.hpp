#pragma once
// A replaceable compute kernel. Manifests pick one per op: `[kernels] attention = "reference"`.
// Attention is the op strategies replace (flash attention); a kernel declares how many floats it
// saves for backward, so its memory shows up in the activation rows of the tensor table.
#include <cstddef>
#include <span>
#include <string_view>

#include "strata/status.hpp"

namespace strata {

struct AttentionShape {
  int batch = 0;
  int seq_len = 0;
  int d_model = 0;
  int n_head = 0;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string_view op() const noexcept = 0;  // "attention"

  // Floats kept between forward and backward (an activation), and scratch needed by backward.
  virtual std::size_t saved_floats(const AttentionShape& shape) const noexcept = 0;
  virtual std::size_t backward_scratch_floats(const AttentionShape& shape) const noexcept = 0;

  // qkv is (B,T,3C) with q,k,v concatenated on the last axis; out is (B,T,C); causal.
  virtual Status attention_forward(const AttentionShape& shape, std::span<float> out, std::span<float> saved,
                                   std::span<const float> qkv) noexcept = 0;
  // Accumulates into dqkv (B,T,3C).
  virtual Status attention_backward(const AttentionShape& shape, std::span<float> dqkv, std::span<const float> dout,
                                    std::span<const float> qkv, std::span<const float> saved,
                                    std::span<float> scratch) noexcept = 0;
};

}  // namespace strata
