#include "core/plugin/op_table_attention.hpp"

namespace strata {

namespace {

class OpTableAttention final : public Kernel {
 public:
  explicit OpTableAttention(HostServices& host) : host_(host) {}

  std::string_view op() const noexcept override { return "attention"; }
  bool supports(const AttentionShape& shape) const noexcept override {
    return host_.ops().has(Op::attention) && shape.n_kv_head > 0 && shape.n_head % shape.n_kv_head == 0;
  }
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override {
    return host_.ops().attention_saved_floats(shape);
  }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return host_.ops().attention_scratch_floats(shape);
  }
  Status attention_forward(const AttentionShape& shape, float* out, float* saved,
                           const AttentionInputs& in) noexcept override {
    host_.ops().attention_forward(shape, out, saved, in);
    return {};
  }
  Status attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                            const AttentionInputs& in, const float* saved, float* scratch) noexcept override {
    host_.ops().attention_backward(shape, grads, dout, in, saved, scratch);
    return {};
  }

 private:
  HostServices& host_;
};

}  // namespace

std::unique_ptr<Kernel> make_op_table_attention(HostServices& host) {
  return std::make_unique<OpTableAttention>(host);
}

}  // namespace strata
