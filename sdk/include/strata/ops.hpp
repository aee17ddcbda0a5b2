#pragma once
// The backend op table (docs/architecture.md, "Backends and the op table"): every op that model
// code, optimizers and precision policies run on backend memory. The caller never dereferences a
// backend pointer on the host. A backend runs ops in order on its compute stream; the ops that
// return a value to the host (the reductions) wait for the stream, so they are the synchronisation
// points of a step.
//
// Ops are data (strata/op_records.hpp): a backend implements two entry points, supports(op) and
// run(op, record), so a new op is a new record and id, not a new virtual function in every backend
// and wrapper. Call sites use the typed wrappers below, which fill a record and run it. A wrapper
// that changes a few ops derives from strata/forwarding_ops.hpp and intercepts their ids.
//
// supports() says which ops a backend runs. The model's own ops (matmuls, norms, attention,
// pointwise, embedding, cross-entropy, conversions, reductions, memory) run on every built-in
// backend; check supports() before calling any other (matmul_*_bf16_input, gemm, geglu, the
// elementwise ops, attention_decode, qr, eigh, host_kernel). Running an op a backend does not support is a
// programming error: the process stops naming the op and the backend, as a failed assertion would.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "strata/op_records.hpp"

namespace strata {

class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string_view backend() const noexcept = 0;  // "cpu", "cuda:0"
  virtual bool supports(Op op) const noexcept = 0;
  // Runs one op: `record` is the op's record (strata::op::<Name> for `op`); results a record
  // carries are written into it.
  virtual void run(Op op, void* record) noexcept = 0;

  // A record's own op (a class that overrides run(Op, void*) brings this back with `using Ops::run`).
  template <typename Record>
  void run(Record& record) noexcept {
    run(Record::id, &record);
  }

  // --- the typed wrappers: one per op, the record's fields as arguments.
  void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                      Scratch scratch) noexcept {
    op::MatmulForward r{out, inp, weight, bias, shape, scratch};
    run(r);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, Weight weight,
                       const MatmulShape& shape, Scratch scratch, GradientWrite dinp_write) noexcept {
    op::MatmulBackward r{dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write};
    run(r);
  }
  void matmul_forward_bf16_input(float* out, const std::uint16_t* inp, Weight weight, const float* bias,
                                 const MatmulShape& shape) noexcept {
    op::MatmulForwardBf16Input r{out, inp, weight, bias, shape};
    run(r);
  }
  void matmul_backward_bf16_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const std::uint16_t* inp, Weight weight, const MatmulShape& shape,
                                  GradientWrite dinp_write) noexcept {
    op::MatmulBackwardBf16Input r{dinp, dweight, dbias, dout, inp, weight, shape, dinp_write};
    run(r);
  }
  // c (m, n) = alpha op(a) @ op(b) + beta c, f32 operands, row-major, leading dimensions as stored.
  void gemm(Transpose transpose_a, Transpose transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
            std::int64_t ldc) noexcept {
    op::Gemm r{transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, DType::f32, beta, c, ldc};
    run(r);
  }

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                         std::int64_t rows, std::int64_t channels, float eps) noexcept {
    op::LayernormForward r{out, mean, rstd, inp, weight, bias, rows, channels, eps};
    run(r);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                          std::int64_t channels) noexcept {
    op::LayernormBackward r{dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels};
    run(r);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                       std::int64_t channels, float eps, float weight_offset = 0.0f) noexcept {
    op::RmsnormForward r{out, rstd, inp, weight, rows, channels, eps, weight_offset};
    run(r);
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                        const float* rstd, std::int64_t rows, std::int64_t channels,
                        float weight_offset = 0.0f) noexcept {
    op::RmsnormBackward r{dinp, dweight, dout, inp, weight, rstd, rows, channels, weight_offset};
    run(r);
  }

  std::int64_t attention_saved_floats(const AttentionShape& shape) noexcept {
    return attention_sizes(shape).saved_floats;
  }
  std::int64_t attention_scratch_floats(const AttentionShape& shape) noexcept {
    return attention_sizes(shape).scratch_floats;
  }
  op::AttentionSizes attention_sizes(const AttentionShape& shape) noexcept {
    op::AttentionSizes r{shape};
    run(r);
    return r;
  }
  void attention_forward(const AttentionShape& shape, float* out, float* saved, const AttentionInputs& in) noexcept {
    op::AttentionForward r{shape, out, saved, in};
    run(r);
  }
  void attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                          const AttentionInputs& in, const float* saved, float* scratch) noexcept {
    op::AttentionBackward r{shape, grads, dout, in, saved, scratch};
    run(r);
  }
  void attention_decode(const DecodeShape& shape, float* out, const AttentionInputs& in, float* k_cache,
                        float* v_cache) noexcept {
    op::AttentionDecode r{shape, out, in, k_cache, v_cache};
    run(r);
  }

  void gelu_forward(float* out, const float* inp, std::int64_t count) noexcept {
    op::GeluForward r{out, inp, count};
    run(r);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count,
                     GradientWrite write) noexcept {
    op::GeluBackward r{dinp, inp, dout, count, write};
    run(r);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count) noexcept {
    op::SwigluForward r{out, gate, up, count};
    run(r);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       std::int64_t count, GradientWrite write) noexcept {
    op::SwigluBackward r{dgate, dup, dout, gate, up, count, write};
    run(r);
  }
  void geglu_forward(float* out, const float* gate, const float* up, std::int64_t count) noexcept {
    op::GegluForward r{out, gate, up, count};
    run(r);
  }
  void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                      std::int64_t count, GradientWrite write) noexcept {
    op::GegluBackward r{dgate, dup, dout, gate, up, count, write};
    run(r);
  }
  // Training's RoPE: row r at position r % seq_len, frequencies from theta.
  void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
            bool inverse) noexcept {
    op::Rope r{x, rows, stride, seq_len, 0, n_heads, head_dim, theta, nullptr, nullptr, inverse};
    run(r);
  }
  // Decoding's: `rows` consecutive positions of one sequence from first_position.
  void rope_at(float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position, int n_heads, int head_dim,
               float theta) noexcept {
    op::Rope r{x, rows, stride, rows, first_position, n_heads, head_dim, theta, nullptr, nullptr, false};
    run(r);
  }
  // A scaled RoPE's: the inverse frequencies given (host memory).
  void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                        std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                        bool inverse) noexcept {
    op::Rope r{x,       rows,   stride, seq_len, first_position, n_heads, head_dim, 0.0f, inverse_frequencies,
               nullptr, inverse};
    run(r);
  }
  void residual_forward(float* out, const float* a, const float* b, std::int64_t count) noexcept {
    op::ResidualForward r{out, a, b, count};
    run(r);
  }

  void embedding_forward(float* out, const std::int32_t* tokens, Weight wte, Weight wpe, std::int64_t batch,
                         std::int64_t seq_len, std::int64_t channels) noexcept {
    op::EmbeddingForward r{out, tokens, wte, wpe, batch, seq_len, channels};
    run(r);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels) noexcept {
    op::EmbeddingBackward r{dwte, dwpe, dout, tokens, batch, seq_len, channels};
    run(r);
  }

  void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits, const float* logits,
                                   const std::int32_t* targets, std::int64_t rows, std::int64_t first,
                                   std::int64_t width, std::int64_t vocab) noexcept {
    op::CrossEntropyForwardChunk r{running_max, running_sum, target_logits, logits, targets, rows, first, width, vocab};
    run(r);
  }
  void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                            const float* target_logits, const std::int32_t* targets, std::int64_t rows) noexcept {
    op::CrossEntropyFinish r{losses, logsumexp, running_max, running_sum, target_logits, targets, rows};
    run(r);
  }
  void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                    const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                    std::int64_t width, std::int64_t vocab) noexcept {
    op::CrossEntropyBackwardChunk r{dlogits, logits, logsumexp, targets, dloss, rows, first, width, vocab};
    run(r);
  }

  // Runs `body()` (noexcept) as op::HostKernel: check supports(Op::host_kernel) first.
  template <typename Body>
  void host_kernel(const char* name, double work, Body&& body) noexcept {
    op::HostKernel r{[](void* context) noexcept { (*static_cast<std::remove_reference_t<Body>*>(context))(); }, &body,
                     name, work};
    run(r);
  }

  void widen(float* out, const std::uint16_t* in, std::int64_t count) noexcept {
    op::Widen r{out, in, count};
    run(r);
  }
  void narrow(std::uint16_t* out, const float* in, std::int64_t count) noexcept {
    op::Narrow r{out, in, count};
    run(r);
  }
  void narrow_and_round(std::uint16_t* out, float* in, std::int64_t count) noexcept {
    op::NarrowAndRound r{out, in, count};
    run(r);
  }

  double sum_of_squares(const float* values, std::int64_t count) noexcept {
    op::SumOfSquares r{values, count};
    run(r);
    return r.result;
  }
  bool all_finite(const float* values, std::int64_t count) noexcept {
    op::AllFinite r{values, count};
    run(r);
    return r.result;
  }
  double sum(const float* values, std::int64_t count) noexcept {
    op::Sum r{values, count};
    run(r);
    return r.result;
  }

  void scale(float* values, float factor, std::int64_t count) noexcept {
    op::Scale r{values, factor, count};
    run(r);
  }
  void add_scaled(float* y, float alpha, const float* x, std::int64_t count) noexcept {
    op::AddScaled r{y, alpha, x, count};
    run(r);
  }
  void sign(float* out, const float* x, std::int64_t count) noexcept {
    op::Sign r{out, x, count};
    run(r);
  }
  void mul(float* out, const float* a, const float* b, std::int64_t count) noexcept {
    op::Mul r{out, a, b, count};
    run(r);
  }
  void div(float* out, const float* a, const float* b, float eps, std::int64_t count) noexcept {
    op::Div r{out, a, b, eps, count};
    run(r);
  }
  void sqrt(float* out, const float* x, std::int64_t count) noexcept {
    op::Sqrt r{out, x, count};
    run(r);
  }

  void fill(void* data, std::uint8_t byte, std::uint64_t bytes) noexcept {
    op::Fill r{data, byte, bytes};
    run(r);
  }
  void copy(void* destination, const void* source, std::uint64_t bytes) noexcept {
    op::Copy r{destination, source, bytes};
    run(r);
  }
  void copy_to_host(void* host_destination, const void* source, std::uint64_t bytes) noexcept {
    op::CopyToHost r{host_destination, source, bytes};
    run(r);
  }
  void copy_from_host(void* destination, const void* host_source, std::uint64_t bytes) noexcept {
    op::CopyFromHost r{destination, host_source, bytes};
    run(r);
  }

  void qr(float* a, float* r_factor, std::int64_t rows, std::int64_t cols) noexcept {
    op::Qr r{a, r_factor, rows, cols};
    run(r);
  }
  void eigh(float* a, float* values, std::int64_t n) noexcept {
    op::Eigh r{a, values, n};
    run(r);
  }

 protected:
  // An op this backend does not support was run: a programming error (check supports() first).
  [[noreturn]] void unsupported(Op op) const noexcept {
    std::fprintf(stderr, "strata: op '%.*s' is not supported by backend '%.*s' (check Ops::supports first)\n",
                 static_cast<int>(op_name(op).size()), op_name(op).data(), static_cast<int>(backend().size()),
                 backend().data());
    std::abort();
  }
};

// A record of `op`, for a backend's run(): the caller passed the record that goes with the id.
template <typename Record>
Record& record_of(void* record) noexcept {
  return *static_cast<Record*>(record);
}

}  // namespace strata
