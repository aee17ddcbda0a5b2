// The op wrappers a family's block calls (core/model/transformer.hpp): each finds its rows, reads
// and writes activations through the bf16 staging, times its kernel, and runs one backend op (a
// matmul also runs its adapters). Shapes come from the rows: N = batch * seq_len, or a decoding
// step's new positions.
#include <stdexcept>

#include "core/model/kv_cache.hpp"
#include "core/model/transformer.hpp"

namespace strata {

namespace {

void check(const Status& status, int layer) {
  if (!status) throw std::runtime_error("attention kernel at layer " + std::to_string(layer) + ": " + status.message());
}

}  // namespace

void Transformer::layernorm(int l, int out, int mean, int rstd, int x, int weight, int bias, float eps) {
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::layernorm_forward);
  ops().layernorm_forward(this->out(l, out), this->out(l, mean), this->out(l, rstd), input, value(l, weight),
                          value(l, bias), rows(), width(l, out), eps);
}

void Transformer::rmsnorm(int l, int out, int rstd, int x, int weight, float eps, float weight_offset) {
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::rmsnorm_forward);
  ops().rmsnorm_forward(this->out(l, out), this->out(l, rstd), input, value(l, weight), rows(), width(l, out), eps,
                        weight_offset);
}

void Transformer::linear(int l, int out, int x, int weight, int bias) {
  if (const std::uint16_t* stored = bf16_input(l, x, weight)) {  // no widening, no narrowing
    auto timer = profiler_.scope(ProfileKind::matmul_forward);
    ops().matmul_forward_bf16_input(this->out(l, out), stored, weight_of(l, weight),
                                    bias == kNoBias ? nullptr : value(l, bias), matmul_shape(l, weight));
    return;
  }
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::matmul_forward);
  adapted_matmul_forward(parameter(l, weight), this->out(l, out), input, bias == kNoBias ? nullptr : value(l, bias),
                         matmul_shape(l, weight));
}

void Transformer::rope(int l, int x, int heads) {
  float* values = out(l, x);  // rotated in place, before anything reads it
  auto timer = profiler_.scope(ProfileKind::rope);
  const AttentionShape& shape = attention_shape();
  const std::int64_t stride = width(l, x);
  if (!rope_frequencies_.empty()) {  // a scaled RoPE (Llama 3's): the frequencies are the model's
    const std::int64_t first = decoding_ ? decoding_->first_position : 0;
    ops().rope_frequencies(values, rows(), stride, decoding_ ? rows() : shape.seq_len, first, heads, shape.head_dim,
                           rope_frequencies_.data(), false);
  } else if (decoding_) {
    ops().rope_at(values, rows(), stride, decoding_->first_position, heads, shape.head_dim, rope_theta_);
  } else {
    ops().rope(values, rows(), stride, shape.seq_len, heads, shape.head_dim, rope_theta_, false);
  }
}

void Transformer::rope_backward(float* dx, std::int64_t stride, int heads) {
  auto timer = profiler_.scope(ProfileKind::rope);
  const AttentionShape& shape = attention_shape();
  if (!rope_frequencies_.empty())
    ops().rope_frequencies(dx, rows(), stride, shape.seq_len, 0, heads, shape.head_dim, rope_frequencies_.data(), true);
  else
    ops().rope(dx, rows(), stride, shape.seq_len, heads, shape.head_dim, rope_theta_, true);
}

// Recomputed in backward (for the kernel's saved rows), `out` is written again with the values the
// forward wrote: the attention kernels are deterministic (docs/architecture.md, "Determinism").
// Decoding, the keys and values of the new positions join the cache and the queries attend to it
// (the backend's attention_decode; the kernel's saved rows are not needed).
void Transformer::attention(int l, int out, int saved, const AttentionInputs& qkv) {
  auto timer = profiler_.scope(ProfileKind::attention_forward);
  if (decoding_) {
    const AttentionShape& shape = attention_shape();
    ops().attention_decode(DecodeShape{decoding_->rows, decoding_->first_position, decoding_->cache->capacity(),
                                       shape.n_head, shape.n_kv_head, shape.head_dim, shape.window},
                           this->out(l, out), qkv, decoding_->cache->keys(l), decoding_->cache->values(l));
    return;
  }
  check(attention_.attention_forward(kernel_call(l, true), attention_shape(), this->out(l, out), this->out(l, saved),
                                     qkv),
        l);
}

void Transformer::gelu(int l, int out, int x) {
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::gelu_forward);
  ops().gelu_forward(this->out(l, out), input, rows() * width(l, out));
}

void Transformer::swiglu(int l, int out, int gate, int up) {
  const float* g = in(l, gate);
  const float* u = in(l, up);
  auto timer = profiler_.scope(ProfileKind::swiglu_forward);
  ops().swiglu_forward(this->out(l, out), g, u, rows() * width(l, out));
}

void Transformer::geglu(int l, int out, int gate, int up) {
  const float* g = in(l, gate);
  const float* u = in(l, up);
  auto timer = profiler_.scope(ProfileKind::geglu_forward);
  ops().geglu_forward(this->out(l, out), g, u, rows() * width(l, out));
}

void Transformer::residual(int l, int x, int skip) {
  const float* other = in(l, skip);
  float* values = out(l, x);  // the sum is rounded once, after the add
  auto timer = profiler_.scope(ProfileKind::residual_forward);
  ops().residual_forward(values, values, other, rows() * width(l, x));
}

void Transformer::identity(int l) {
  const float* input = in(l, kBlockInput);
  const int output = layer_output_kind();
  ops().copy(out(l, output), input, static_cast<std::uint64_t>(rows() * width(l, output)) * sizeof(float));
}

void Transformer::linear_backward(int l, float* dx, GradientWrite write, const float* dy, int x, int weight, int bias) {
  if (const std::uint16_t* stored = bf16_input(l, x, weight)) {
    auto timer = profiler_.scope(ProfileKind::matmul_backward);
    ops().matmul_backward_bf16_input(dx, grad_of(parameter(l, weight)), bias == kNoBias ? nullptr : grad(l, bias), dy,
                                     stored, weight_of(l, weight), matmul_shape(l, weight), write);
    return;
  }
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::matmul_backward);
  adapted_matmul_backward(parameter(l, weight), dx, bias == kNoBias ? nullptr : grad(l, bias), dy, input,
                          matmul_shape(l, weight), write);
}

void Transformer::layernorm_backward(int l, float* dx, const float* dy, int x, int weight, int bias, int mean,
                                     int rstd) {
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::layernorm_backward);
  ops().layernorm_backward(dx, grad(l, weight), grad(l, bias), dy, input, value(l, weight), in(l, mean), in(l, rstd),
                           rows(), width(l, x));
}

void Transformer::rmsnorm_backward(int l, float* dx, const float* dy, int x, int weight, int rstd,
                                   float weight_offset) {
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::rmsnorm_backward);
  ops().rmsnorm_backward(dx, grad(l, weight), dy, input, value(l, weight), in(l, rstd), rows(), width(l, x),
                         weight_offset);
}

void Transformer::gelu_backward(int l, float* dx, const float* dy, int x) {
  const float* input = in(l, x);
  auto timer = profiler_.scope(ProfileKind::gelu_backward);
  ops().gelu_backward(dx, input, dy, elements(row(l, x)), GradientWrite::overwrite);
}

void Transformer::swiglu_backward(int l, float* dgate, float* dup, const float* dy, int gate, int up) {
  const float* g = in(l, gate);
  const float* u = in(l, up);
  auto timer = profiler_.scope(ProfileKind::swiglu_backward);
  ops().swiglu_backward(dgate, dup, dy, g, u, elements(row(l, gate)), GradientWrite::overwrite);
}

void Transformer::geglu_backward(int l, float* dgate, float* dup, const float* dy, int gate, int up) {
  const float* g = in(l, gate);
  const float* u = in(l, up);
  auto timer = profiler_.scope(ProfileKind::geglu_backward);
  ops().geglu_backward(dgate, dup, dy, g, u, elements(row(l, gate)), GradientWrite::overwrite);
}

void Transformer::attention_backward(int l, const AttentionGrads& grads, const float* dy, int out, int saved,
                                     const AttentionInputs& qkv) {
  const float* output = in(l, out);
  auto timer = profiler_.scope(ProfileKind::attention_backward);
  check(attention_.attention_backward(kernel_call(l, false), attention_shape(), grads, dy, output, qkv, in(l, saved),
                                      ws(attention_scratch_)),
        l);
}

}  // namespace strata
