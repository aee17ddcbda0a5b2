#pragma once
// The default attention kernel: the backend's own attention op (strata/ops.hpp), behind the Kernel
// interface the model families call, so "fast" is whatever the backend runs (the CPU's fast loops,
// the CUDA backend's cuBLAS attention) and a plugin kernel replaces it the same way.
#include <memory>
#include <string>

#include "strata/kernel.hpp"

namespace strata {

class OpsAttentionKernel final : public Kernel {
 public:
  explicit OpsAttentionKernel(Ops& ops) : ops_(ops) {}
  std::string_view op() const noexcept override { return "attention"; }
  // Both built-in backends' attention ops apply a sliding window (the CUDA one's softmax masks the
  // keys before it); neither separates packed documents yet.
  Status check(const AttentionShape& shape, const KernelTarget& target) const override {
    if (shape.documents)
      return Status::error("the " + std::string(target.backend) +
                           " backend's attention does not separate packed documents");
    return {};
  }
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override {
    return ops_.attention_saved_floats(shape);
  }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return ops_.attention_scratch_floats(shape);
  }
  Status attention_forward(const KernelCall& /*call*/, const AttentionShape& shape, float* out, float* saved,
                           const AttentionInputs& in) override {
    ops_.attention_forward(shape, out, saved, in);
    return {};
  }
  Status attention_backward(const KernelCall& /*call*/, const AttentionShape& shape, const AttentionGrads& grads,
                            const float* dout, const float* /*out*/, const AttentionInputs& in, const float* saved,
                            float* scratch) override {
    ops_.attention_backward(shape, grads, dout, in, saved, scratch);
    return {};
  }

 private:
  Ops& ops_;
};

}  // namespace strata
