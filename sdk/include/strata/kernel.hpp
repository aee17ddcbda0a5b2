#pragma once
// A replaceable compute kernel. Manifests pick one per op: `[kernels] attention = "reference"`.
// Attention is the op strategies replace (flash attention); a kernel declares how many floats it
// saves for backward, so its memory shows up in the activation rows of the tensor table. The
// shapes and operands are the op table's (strata/ops.hpp); pointers are the backend's memory.
#include <cstdint>
#include <string_view>

#include "strata/ops.hpp"
#include "strata/status.hpp"

namespace strata {

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string_view op() const noexcept = 0;  // "attention"
  // Whether this kernel handles the shape; the host refuses a manifest whose kernel does not.
  virtual bool supports(const AttentionShape& /*shape*/) const noexcept { return true; }

  // Floats kept between forward and backward (an activation), and scratch needed by backward.
  virtual std::int64_t saved_floats(const AttentionShape& shape) const noexcept = 0;
  virtual std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept = 0;

  // Causal; out is (N, n_head * head_dim). Both may throw: the host reports the exception with
  // the plugin's name and the layer, as it does an error Status.
  virtual Status attention_forward(const AttentionShape& shape, float* out, float* saved,
                                   const AttentionInputs& in) = 0;
  // Adds into the gradients.
  virtual Status attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                                    const AttentionInputs& in, const float* saved, float* scratch) = 0;
};

}  // namespace strata
