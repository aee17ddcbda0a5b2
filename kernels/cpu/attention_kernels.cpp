#include "kernels/cpu/attention_kernels.hpp"

#include "kernels/cpu/attention.hpp"

namespace strata::cpu {

namespace {

class CpuAttentionKernel final : public Kernel {
 public:
  explicit CpuAttentionKernel(AttentionImpl impl) : impl_(impl) {}

  std::string_view op() const noexcept override { return "attention"; }

  std::size_t saved_floats(const AttentionShape& shape) const noexcept override {
    return static_cast<std::size_t>(shape.batch) * shape.n_head * shape.seq_len * shape.seq_len;
  }
  std::size_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return saved_floats(shape);
  }

  Status attention_forward(const AttentionShape& shape, std::span<float> out, std::span<float> saved,
                           std::span<const float> qkv) noexcept override {
    if (impl_ == AttentionImpl::reference) {
      reference::attention_forward(out.data(), saved.data(), qkv.data(), shape);
    } else {
      cpu::attention_forward(out.data(), saved.data(), qkv.data(), shape);
    }
    return {};
  }

  Status attention_backward(const AttentionShape& shape, std::span<float> dqkv, std::span<const float> dout,
                            std::span<const float> qkv, std::span<const float> saved,
                            std::span<float> scratch) noexcept override {
    if (impl_ == AttentionImpl::reference) {
      reference::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), saved.data(), shape);
    } else {
      cpu::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), saved.data(), shape);
    }
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
