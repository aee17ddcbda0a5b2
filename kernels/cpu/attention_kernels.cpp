#include "kernels/cpu/attention_kernels.hpp"

#include <string>

#include "kernels/cpu/attention.hpp"

namespace strata::cpu {

namespace {

class CpuAttentionKernel final : public Kernel {
 public:
  explicit CpuAttentionKernel(AttentionImpl impl) : impl_(impl) {}

  std::string_view op() const noexcept override { return "attention"; }
  // Both read their operands on the host: the CPU backend's memory only.
  Status check(const AttentionShape& shape, const KernelTarget& target) const noexcept override {
    if (target.backend != "cpu")
      return Status::error("the built-in " + std::string(impl_ == AttentionImpl::reference ? "reference" : "fast") +
                           " kernel runs on the CPU backend only, not on " + std::string(target.backend) +
                           " (leave [kernels] attention unset to run the backend's own attention)");
    if (shape.n_kv_head <= 0 || shape.n_head % shape.n_kv_head != 0)
      return Status::error("n_head " + std::to_string(shape.n_head) + " is not a multiple of n_kv_head " +
                           std::to_string(shape.n_kv_head));
    if (shape.documents) return Status::error("the built-in CPU attention does not separate packed documents");
    return {};
  }

  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override {
    return static_cast<std::int64_t>(shape.batch) * shape.n_head * shape.seq_len * shape.seq_len;
  }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return saved_floats(shape);
  }

  Status attention_forward(const KernelCall& /*call*/, const AttentionShape& shape, float* out, float* saved,
                           const AttentionInputs& in) noexcept override {
    if (impl_ == AttentionImpl::reference)
      reference::attention_forward<float>(out, saved, {in.q, in.k, in.v, in.q_stride, in.kv_stride}, shape);
    else
      cpu::attention_forward(out, saved, in, shape);
    return {};
  }

  Status attention_backward(const KernelCall& /*call*/, const AttentionShape& shape, const AttentionGrads& grads,
                            const float* dout, const float* /*out*/, const AttentionInputs& in, const float* saved,
                            float* scratch) noexcept override {
    if (impl_ == AttentionImpl::reference)
      reference::attention_backward<float>({grads.dq, grads.dk, grads.dv, grads.q_stride, grads.kv_stride}, scratch,
                                           dout, {in.q, in.k, in.v, in.q_stride, in.kv_stride}, saved, shape);
    else
      cpu::attention_backward(grads, scratch, dout, in, saved, shape);
    return {};
  }

 private:
  AttentionImpl impl_;
};

}  // namespace

std::unique_ptr<Kernel> make_attention_kernel(AttentionImpl impl) {
  return std::make_unique<CpuAttentionKernel>(impl);
}

}  // namespace strata::cpu
