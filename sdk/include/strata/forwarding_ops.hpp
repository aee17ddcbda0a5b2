#pragma once
// An op table that forwards every op to another: derive from it and override only the ops you
// change (the host's quantized-weight matmuls do: core/tensor/quantized_matmul_ops.hpp). A new op
// is forwarded here once, not in every wrapper. A wrapper that changes what a bf16 weight's matmuls
// compute must also override the bf16-input matmuls (9.9), or answer false for them in has(): the
// model calls those instead where the backend offers them.
#include "strata/ops.hpp"

namespace strata {

class ForwardingOps : public Ops {
 public:
  explicit ForwardingOps(Ops& base) noexcept : base_(base) {}

  std::string_view backend() const noexcept override { return base_.backend(); }
  bool has(Op op) const noexcept override { return base_.has(op); }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                         std::int64_t rows, std::int64_t channels, float eps) noexcept override {
    base_.layernorm_forward(out, mean, rstd, inp, weight, bias, rows, channels, eps);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                          std::int64_t channels) noexcept override {
    base_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                       std::int64_t channels, float eps) noexcept override {
    base_.rmsnorm_forward(out, rstd, inp, weight, rows, channels, eps);
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                        const float* rstd, std::int64_t rows, std::int64_t channels) noexcept override {
    base_.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, rows, channels);
  }
  std::int64_t attention_saved_floats(const AttentionShape& shape) const noexcept override {
    return base_.attention_saved_floats(shape);
  }
  std::int64_t attention_scratch_floats(const AttentionShape& shape) const noexcept override {
    return base_.attention_scratch_floats(shape);
  }
  void attention_forward(const AttentionShape& shape, float* out, float* saved,
                         const AttentionInputs& in) noexcept override {
    base_.attention_forward(shape, out, saved, in);
  }
  void attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                          const AttentionInputs& in, const float* saved, float* scratch) noexcept override {
    base_.attention_backward(shape, grads, dout, in, saved, scratch);
  }
  void gelu_forward(float* out, const float* inp, std::int64_t count) noexcept override {
    base_.gelu_forward(out, inp, count);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count,
                     GradientWrite write) noexcept override {
    base_.gelu_backward(dinp, inp, dout, count, write);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count) noexcept override {
    base_.swiglu_forward(out, gate, up, count);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       std::int64_t count, GradientWrite write) noexcept override {
    base_.swiglu_backward(dgate, dup, dout, gate, up, count, write);
  }
  void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
            bool inverse) noexcept override {
    base_.rope(x, rows, stride, seq_len, n_heads, head_dim, theta, inverse);
  }
  void residual_forward(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    base_.residual_forward(out, a, b, count);
  }
  void embedding_forward(float* out, const std::int32_t* tokens, Weight wte, Weight wpe, std::int64_t batch,
                         std::int64_t seq_len, std::int64_t channels) noexcept override {
    base_.embedding_forward(out, tokens, wte, wpe, batch, seq_len, channels);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels) noexcept override {
    base_.embedding_backward(dwte, dwpe, dout, tokens, batch, seq_len, channels);
  }
  void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits, const float* logits,
                                   const std::int32_t* targets, std::int64_t rows, std::int64_t first,
                                   std::int64_t width, std::int64_t vocab) noexcept override {
    base_.cross_entropy_forward_chunk(running_max, running_sum, target_logits, logits, targets, rows, first, width,
                                      vocab);
  }
  void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                            const float* target_logits, std::int64_t rows) noexcept override {
    base_.cross_entropy_finish(losses, logsumexp, running_max, running_sum, target_logits, rows);
  }
  void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                    const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                    std::int64_t width, std::int64_t vocab) noexcept override {
    base_.cross_entropy_backward_chunk(dlogits, logits, logsumexp, targets, dloss, rows, first, width, vocab);
  }
  void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                    const AdamWHyper& hyper) noexcept override {
    base_.adamw_update(param, grad, m, v, count, hyper);
  }
  void sgd_update(float* param, const float* grad, float* velocity, std::int64_t count,
                  const SgdHyper& hyper) noexcept override {
    base_.sgd_update(param, grad, velocity, count, hyper);
  }
  void widen(float* out, const std::uint16_t* in, std::int64_t count) noexcept override { base_.widen(out, in, count); }
  void narrow(std::uint16_t* out, const float* in, std::int64_t count) noexcept override {
    base_.narrow(out, in, count);
  }
  void narrow_and_round(std::uint16_t* out, float* in, std::int64_t count) noexcept override {
    base_.narrow_and_round(out, in, count);
  }
  double sum_of_squares(const float* values, std::int64_t count) noexcept override {
    return base_.sum_of_squares(values, count);
  }
  bool all_finite(const float* values, std::int64_t count) noexcept override { return base_.all_finite(values, count); }
  void scale(float* values, float factor, std::int64_t count) noexcept override { base_.scale(values, factor, count); }
  void add_scaled(float* y, float alpha, const float* x, std::int64_t count) noexcept override {
    base_.add_scaled(y, alpha, x, count);
  }
  double sum(const float* values, std::int64_t count) noexcept override { return base_.sum(values, count); }
  void fill(void* data, std::uint8_t byte, std::uint64_t bytes) noexcept override { base_.fill(data, byte, bytes); }
  void copy(void* destination, const void* source, std::uint64_t bytes) noexcept override {
    base_.copy(destination, source, bytes);
  }
  void copy_to_host(void* host_destination, const void* source, std::uint64_t bytes) noexcept override {
    base_.copy_to_host(host_destination, source, bytes);
  }
  void copy_from_host(void* destination, const void* host_source, std::uint64_t bytes) noexcept override {
    base_.copy_from_host(destination, host_source, bytes);
  }
  void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                      Scratch scratch) noexcept override {
    base_.matmul_forward(out, inp, weight, bias, shape, scratch);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, Weight weight,
                       const MatmulShape& shape, Scratch scratch, GradientWrite dinp_write) noexcept override {
    base_.matmul_backward(dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write);
  }
  void sign(float* out, const float* x, std::int64_t count) noexcept override { base_.sign(out, x, count); }
  void mul(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    base_.mul(out, a, b, count);
  }
  void div(float* out, const float* a, const float* b, float eps, std::int64_t count) noexcept override {
    base_.div(out, a, b, eps, count);
  }
  void sqrt(float* out, const float* x, std::int64_t count) noexcept override { base_.sqrt(out, x, count); }
  void rope_at(float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position, int n_heads, int head_dim,
               float theta) noexcept override {
    base_.rope_at(x, rows, stride, first_position, n_heads, head_dim, theta);
  }
  void attention_decode(const DecodeShape& shape, float* out, const AttentionInputs& in, float* k_cache,
                        float* v_cache) noexcept override {
    base_.attention_decode(shape, out, in, k_cache, v_cache);
  }
  void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                        std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                        bool inverse) noexcept override {
    base_.rope_frequencies(x, rows, stride, seq_len, first_position, n_heads, head_dim, inverse_frequencies, inverse);
  }
  void matmul_forward_bf16_input(float* out, const std::uint16_t* inp, Weight weight, const float* bias,
                                 const MatmulShape& shape) noexcept override {
    base_.matmul_forward_bf16_input(out, inp, weight, bias, shape);
  }
  void matmul_backward_bf16_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const std::uint16_t* inp, Weight weight, const MatmulShape& shape,
                                  GradientWrite dinp_write) noexcept override {
    base_.matmul_backward_bf16_input(dinp, dweight, dbias, dout, inp, weight, shape, dinp_write);
  }

 protected:
  Ops& base() const noexcept { return base_; }

 private:
  Ops& base_;
};

}  // namespace strata
