#include "kernels/cpu/cpu_ops.hpp"

#include <cmath>
#include <cstring>

#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/attention_kernels.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/decode.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/reductions.hpp"
#include "kernels/cpu/residual.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/scale.hpp"
#include "kernels/cpu/sgd.hpp"
#include "kernels/cpu/swiglu.hpp"

namespace strata::cpu {

namespace {

const std::uint16_t* bf16_data(Weight weight) {
  return static_cast<const std::uint16_t*>(weight.data);
}
const float* f32_data(Weight weight) {
  return static_cast<const float*>(weight.data);
}

class CpuOps final : public Ops {
 public:
  CpuOps() : attention_(make_attention_kernel(AttentionImpl::fast)) {}

  std::string_view backend() const noexcept override { return "cpu"; }
  // Not matmul_bf16_input: the CPU's bf16 products compute in f32, on the input the caller widened.
  bool has(Op op) const noexcept override { return op != Op::count && op != Op::matmul_bf16_input; }

  void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                      Scratch scratch) noexcept override {
    if (weight.dtype == DType::bf16)
      matmul_forward_bf16(out, inp, bf16_data(weight), bias, shape.rows, shape.in_features, shape.out_features,
                          shape.layout, scratch.data, scratch.elements);
    else
      cpu::matmul_forward(out, inp, f32_data(weight), bias, shape.rows, shape.in_features, shape.out_features,
                          shape.layout);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, Weight weight,
                       const MatmulShape& shape, Scratch scratch, GradientWrite dinp_write) noexcept override {
    if (weight.dtype == DType::bf16)
      matmul_backward_bf16(dinp, dweight, dbias, dout, inp, bf16_data(weight), shape.rows, shape.in_features,
                           shape.out_features, shape.layout, scratch.data, scratch.elements, dinp_write);
    else
      cpu::matmul_backward(dinp, dweight, dbias, dout, inp, f32_data(weight), shape.rows, shape.in_features,
                           shape.out_features, shape.layout, dinp_write);
  }

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                         std::int64_t rows, std::int64_t channels, float eps) noexcept override {
    cpu::layernorm_forward(out, mean, rstd, inp, weight, bias, rows, channels, eps);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                          std::int64_t channels) noexcept override {
    cpu::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                       std::int64_t channels, float eps) noexcept override {
    cpu::rmsnorm_forward(out, rstd, inp, weight, rows, channels, eps);
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                        const float* rstd, std::int64_t rows, std::int64_t channels) noexcept override {
    cpu::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, rows, channels);
  }

  // The fast attention kernel, which `[kernels] attention = "fast"` also selects.
  std::int64_t attention_saved_floats(const AttentionShape& shape) const noexcept override {
    return attention_->saved_floats(shape);
  }
  std::int64_t attention_scratch_floats(const AttentionShape& shape) const noexcept override {
    return attention_->backward_scratch_floats(shape);
  }
  void attention_forward(const AttentionShape& shape, float* out, float* saved,
                         const AttentionInputs& in) noexcept override {
    (void)attention_->attention_forward(shape, out, saved, in);  // the CPU kernels cannot fail
  }
  void attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                          const AttentionInputs& in, const float* saved, float* scratch) noexcept override {
    (void)attention_->attention_backward(shape, grads, dout, nullptr, in, saved, scratch);  // reads no output
  }

  void gelu_forward(float* out, const float* inp, std::int64_t count) noexcept override {
    cpu::gelu_forward(out, inp, count);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count,
                     GradientWrite write) noexcept override {
    cpu::gelu_backward(dinp, inp, dout, count, write);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count) noexcept override {
    cpu::swiglu_forward(out, gate, up, count);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       std::int64_t count, GradientWrite write) noexcept override {
    cpu::swiglu_backward(dgate, dup, dout, gate, up, count, write);
  }
  void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
            bool inverse) noexcept override {
    cpu::rope(x, rows, stride, seq_len, n_heads, head_dim, theta, inverse);
  }
  void residual_forward(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    cpu::residual_forward(out, a, b, count);
  }
  void rope_at(float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position, int n_heads, int head_dim,
               float theta) noexcept override {
    cpu::rope_frequencies(x, rows, stride, rows, first_position, n_heads, head_dim,
                          cpu::rope_inverse_frequencies(theta, head_dim).data(), false);
  }
  void attention_decode(const DecodeShape& shape, float* out, const AttentionInputs& in, float* k_cache,
                        float* v_cache) noexcept override {
    cpu::attention_decode(shape, out, in, k_cache, v_cache);
  }
  void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                        std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                        bool inverse) noexcept override {
    cpu::rope_frequencies(x, rows, stride, seq_len, first_position, n_heads, head_dim, inverse_frequencies, inverse);
  }

  void embedding_forward(float* out, const std::int32_t* tokens, Weight wte, Weight wpe, std::int64_t batch,
                         std::int64_t seq_len, std::int64_t channels) noexcept override {
    if (wte.dtype == DType::bf16)
      embedding_forward_bf16(out, tokens, bf16_data(wte), bf16_data(wpe), batch, seq_len, channels);
    else
      cpu::embedding_forward(out, tokens, f32_data(wte), f32_data(wpe), batch, seq_len, channels);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels) noexcept override {
    cpu::embedding_backward(dwte, dwpe, dout, tokens, batch, seq_len, channels);
  }

  void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits, const float* logits,
                                   const std::int32_t* targets, std::int64_t rows, std::int64_t first,
                                   std::int64_t width, std::int64_t vocab) noexcept override {
    cpu::cross_entropy_forward_chunk(running_max, running_sum, target_logits, logits, targets, rows, first, width,
                                     vocab);
  }
  void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                            const float* target_logits, std::int64_t rows) noexcept override {
    cpu::cross_entropy_finish(losses, logsumexp, running_max, running_sum, target_logits, rows);
  }
  void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                    const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                    std::int64_t width, std::int64_t vocab) noexcept override {
    cpu::cross_entropy_backward_chunk(dlogits, logits, logsumexp, targets, dloss, rows, first, width, vocab);
  }

  void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                    const AdamWHyper& hyper) noexcept override {
    cpu::adamw_update(param, grad, m, v, count, hyper);
  }
  void sgd_update(float* param, const float* grad, float* velocity, std::int64_t count,
                  const SgdHyper& hyper) noexcept override {
    cpu::sgd_update(param, grad, velocity, count, hyper);
  }

  void widen(float* out, const std::uint16_t* in, std::int64_t count) noexcept override { cpu::widen(out, in, count); }
  void narrow(std::uint16_t* out, const float* in, std::int64_t count) noexcept override {
    cpu::narrow(out, in, count);
  }
  void narrow_and_round(std::uint16_t* out, float* in, std::int64_t count) noexcept override {
    cpu::narrow_and_round(out, in, count);
  }

  void scale(float* values, float factor, std::int64_t count) noexcept override { cpu::scale(values, factor, count); }
  void add_scaled(float* y, float alpha, const float* x, std::int64_t count) noexcept override {
    cpu::add_scaled(y, alpha, x, count);
  }
  void sign(float* out, const float* x, std::int64_t count) noexcept override { cpu::sign(out, x, count); }
  void mul(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    cpu::mul(out, a, b, count);
  }
  void div(float* out, const float* a, const float* b, float eps, std::int64_t count) noexcept override {
    cpu::div(out, a, b, eps, count);
  }
  void sqrt(float* out, const float* x, std::int64_t count) noexcept override { cpu::sqrt(out, x, count); }

  double sum_of_squares(const float* values, std::int64_t count) noexcept override {
    return cpu::sum_of_squares(values, count);
  }
  bool all_finite(const float* values, std::int64_t count) noexcept override { return cpu::all_finite(values, count); }
  double sum(const float* values, std::int64_t count) noexcept override { return cpu::sum(values, count); }

  // CPU "device" memory is host memory: fills and copies are memset and memcpy.
  void fill(void* data, std::uint8_t byte, std::uint64_t bytes) noexcept override { std::memset(data, byte, bytes); }
  void copy(void* destination, const void* source, std::uint64_t bytes) noexcept override {
    std::memcpy(destination, source, bytes);
  }
  void copy_to_host(void* host_destination, const void* source, std::uint64_t bytes) noexcept override {
    std::memcpy(host_destination, source, bytes);
  }
  void copy_from_host(void* destination, const void* host_source, std::uint64_t bytes) noexcept override {
    std::memcpy(destination, host_source, bytes);
  }

 private:
  std::unique_ptr<Kernel> attention_;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops() {
  return std::make_unique<CpuOps>();
}

}  // namespace strata::cpu
