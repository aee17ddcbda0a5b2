#pragma once
// The backend op table (docs/architecture.md, "Backends and the op table"): every op that model
// code, optimizers and precision policies run on device memory. Pointers passed to an op are the
// backend's memory (device memory on an accelerator); the caller never dereferences them on the
// host. A backend runs ops in order on its compute stream; ops that return a value to the host (the
// reductions) wait for the stream and copy that one value back, so they are the synchronisation
// points of a step.
//
// Aliasing: an op's outputs may not overlap its inputs unless the op says so ("may alias"). Ops
// that update in place (the optimizer updates, scale, add_scaled) name the operand they update.
//
// The ops of SDK 9.0 up to `add_scaled` are required: every backend implements them. Ops added from
// then on are optional (the version rule, strata/abi.hpp): their default body reports the call as
// unsupported (it stops the process with the op's name, as a failed assertion would), and has()
// reports which ops a backend implements. Check has() before calling an optional op. Plugins
// override ops through strata/kernel.hpp (attention) and strata/weight_quantizer.hpp (matmuls on
// quantized weights); a wrapper that changes a few ops derives from strata/forwarding_ops.hpp.
// Shapes are (rows, channels) row-major unless said otherwise; N = batch * seq_len.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string_view>

#include "strata/dtype.hpp"

namespace strata {

// How a weight matrix is laid out: in_out is (in_features, out_features), as in GPT-2's Conv1D;
// out_in is (out_features, in_features), as in torch.nn.Linear and the tied LM head.
enum class WeightLayout : std::uint8_t { in_out, out_in };

// Whether a gradient output is overwritten or added to.
enum class GradientWrite : std::uint8_t { accumulate, overwrite };

// A weight operand of a matmul: f32 or bf16 storage (compute is f32), or a precision plugin's own
// dtype: i8 with one f32 scale per group (group_size consecutive values of a stored row, or, with
// group_size 0, one scale per output feature), f16 without scales (scales null). No built-in
// backend reads those: the precision plugin that stores them brings their matmuls
// (strata/weight_quantizer.hpp).
struct Weight {
  const void* data = nullptr;
  DType dtype = DType::f32;
  const float* scales = nullptr;
  std::int64_t group_size = 0;
};

struct MatmulShape {
  std::int64_t rows = 0;
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  WeightLayout layout = WeightLayout::in_out;
};

// f32 room a backend may use to widen a bf16 weight chunk by chunk (the caller accounts for it).
struct Scratch {
  float* data = nullptr;
  std::int64_t elements = 0;
};

// Causal self-attention over q (N, n_head, head_dim) and k, v (N, n_kv_head, head_dim), each row
// `stride` floats apart, so GPT-2's packed (N, 3C) qkv is three views of one buffer. Query head h
// reads key/value head h / (n_head / n_kv_head) (grouped-query attention; n_kv_head = n_head is
// multi-head attention).
struct AttentionShape {
  int batch = 0;
  int seq_len = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
};

// Decoding one sequence with a KV cache (optional ops, since 9.2): `rows` new positions, the first
// at `first_position`; the caches hold `capacity` positions of (n_kv_head, head_dim) keys and
// values, contiguous, position-major.
struct DecodeShape {
  std::int64_t rows = 0;
  std::int64_t first_position = 0;
  std::int64_t capacity = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
};

struct AttentionInputs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  std::int64_t q_stride = 0;   // floats between consecutive positions of q
  std::int64_t kv_stride = 0;  // of k and v
};

// Gradients of q, k and v, laid out like the inputs; attention backward adds into them.
struct AttentionGrads {
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  std::int64_t q_stride = 0;
  std::int64_t kv_stride = 0;
};

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  std::int64_t step = 1;    // 1-based, for bias correction
  float grad_scale = 1.0f;  // gradients are multiplied by this first (global-norm clipping)
};

struct SgdHyper {
  float lr = 0.01f;
  float momentum = 0.0f;  // 0: plain SGD, no velocity buffer read
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
};

// The op kinds, for has() and for the conformance test's table.
enum class Op : std::uint8_t {
  matmul_f32,
  matmul_bf16,
  layernorm,
  rmsnorm,
  attention,
  gelu,
  swiglu,
  rope,
  embedding,
  cross_entropy,
  residual,
  adamw,
  sgd,
  convert,
  sum_of_squares,
  all_finite,
  scale,
  add_scaled,
  sum,
  fill,
  copy,
  // Optional (9.0): elementwise arithmetic for optimizers written against the op table.
  sign,
  mul,
  div,
  sqrt,
  // Optional (9.2): decoding with a KV cache.
  rope_at,
  attention_decode,
  rope_frequencies,
  // Optional (9.9): matmuls on a bf16 input.
  matmul_bf16_input,
  count
};

constexpr std::string_view op_name(Op op) noexcept {
  constexpr std::string_view names[] = {"matmul_f32",
                                        "matmul_bf16",
                                        "layernorm",
                                        "rmsnorm",
                                        "attention",
                                        "gelu",
                                        "swiglu",
                                        "rope",
                                        "embedding",
                                        "cross_entropy",
                                        "residual",
                                        "adamw",
                                        "sgd",
                                        "convert",
                                        "sum_of_squares",
                                        "all_finite",
                                        "scale",
                                        "add_scaled",
                                        "sum",
                                        "fill",
                                        "copy",
                                        "sign",
                                        "mul",
                                        "div",
                                        "sqrt",
                                        "rope_at",
                                        "attention_decode",
                                        "rope_frequencies",
                                        "matmul_bf16_input"};
  static_assert(std::size(names) == static_cast<std::size_t>(Op::count));
  return op < Op::count ? names[static_cast<std::size_t>(op)] : "unknown";
}

class Ops {
 public:
  virtual ~Ops() = default;
  virtual std::string_view backend() const noexcept = 0;  // "cpu", "cuda:0"
  virtual bool has(Op op) const noexcept = 0;

  // --- matmul: out (N, out) = inp (N, in) @ W (+ bias). bf16 weights: both layouts; a backend
  // may widen them into `scratch` chunk by chunk. Backward: dinp per dinp_write; dweight and
  // dbias (either may be null) accumulate.
  virtual void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                              Scratch scratch) noexcept = 0;
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                               Weight weight, const MatmulShape& shape, Scratch scratch,
                               GradientWrite dinp_write) noexcept = 0;

  // --- normalisations. mean/rstd are (N), kept for backward. Backward adds into dinp, dweight, dbias.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                 const float* bias, std::int64_t rows, std::int64_t channels, float eps) noexcept = 0;
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                                  std::int64_t channels) noexcept = 0;
  // RMSNorm as in LLaMA: out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps).
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                               std::int64_t channels, float eps) noexcept = 0;
  virtual void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                                const float* rstd, std::int64_t rows, std::int64_t channels) noexcept = 0;

  // --- attention (causal). `saved` holds attention_saved_floats() kept for backward; backward
  // uses attention_scratch_floats() of scratch and adds into the gradients.
  virtual std::int64_t attention_saved_floats(const AttentionShape& shape) const noexcept = 0;
  virtual std::int64_t attention_scratch_floats(const AttentionShape& shape) const noexcept = 0;
  virtual void attention_forward(const AttentionShape& shape, float* out, float* saved,
                                 const AttentionInputs& in) noexcept = 0;
  virtual void attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                                  const AttentionInputs& in, const float* saved, float* scratch) noexcept = 0;

  // --- pointwise. GELU is the tanh approximation. SwiGLU: out = silu(gate) * up, over count
  // elements; backward writes dgate and dup per `write`.
  virtual void gelu_forward(float* out, const float* inp, std::int64_t count) noexcept = 0;
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count,
                             GradientWrite write) noexcept = 0;
  virtual void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count) noexcept = 0;
  virtual void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                               std::int64_t count, GradientWrite write) noexcept = 0;
  // RoPE in Hugging Face's rotate_half layout, in place on x (N, n_heads, head_dim) whose rows are
  // `stride` floats apart: for i < head_dim/2, the pair (x[i], x[i + head_dim/2]) turns by
  // position * theta^(-2i/head_dim), position = row % seq_len. inverse = true turns back, which is
  // the backward pass (the rotation is orthogonal).
  virtual void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim,
                    float theta, bool inverse) noexcept = 0;
  virtual void residual_forward(float* out, const float* a, const float* b, std::int64_t count) noexcept = 0;

  // --- embedding: out (B,T,C) = wte[token] (+ wpe[t] when wpe is not null); tables share a dtype.
  // Backward adds into dwte and dwpe (null: no position table).
  virtual void embedding_forward(float* out, const std::int32_t* tokens, Weight wte, Weight wpe, std::int64_t batch,
                                 std::int64_t seq_len, std::int64_t channels) noexcept = 0;
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                                  std::int64_t batch, std::int64_t seq_len, std::int64_t channels) noexcept = 0;

  // --- cross-entropy over vocabulary chunks of a (rows, width) logits block whose columns are
  // vocabulary ids [first, first + width): forward keeps a running max and sum per row (the
  // running rows start however the first chunk finds them), finish turns them into loss and
  // log-sum-exp. Columns >= vocab are padding. Backward writes the chunk's dlogits (may alias
  // logits), times dloss.
  virtual void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits,
                                           const float* logits, const std::int32_t* targets, std::int64_t rows,
                                           std::int64_t first, std::int64_t width, std::int64_t vocab) noexcept = 0;
  virtual void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                                    const float* target_logits, std::int64_t rows) noexcept = 0;
  virtual void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                            const std::int32_t* targets, float dloss, std::int64_t rows,
                                            std::int64_t first, std::int64_t width, std::int64_t vocab) noexcept = 0;

  // --- optimizer updates, in place on param and the state; per element, in this order, in f32:
  //   AdamW: g = grad * grad_scale;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g;
  //          param = param (1 - lr weight_decay)
  //                  - (lr / (1 - beta1^step)) m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
  //          (decoupled decay; eps is added after the bias correction of v, as PyTorch does)
  //   SGD:   g = grad * grad_scale;  velocity = momentum velocity + g when momentum > 0, else
  //          velocity is g (and null);  param = param (1 - lr weight_decay) - lr velocity
  // No operand may alias another.
  virtual void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                            const AdamWHyper& hyper) noexcept = 0;
  virtual void sgd_update(float* param, const float* grad, float* velocity, std::int64_t count,
                          const SgdHyper& hyper) noexcept = 0;

  // --- conversions. narrow rounds f32 to bf16 (nearest even); narrow_and_round also writes the
  // rounded values back into the f32 source, so the values computed on and the values stored agree.
  virtual void widen(float* out, const std::uint16_t* in, std::int64_t count) noexcept = 0;
  virtual void narrow(std::uint16_t* out, const float* in, std::int64_t count) noexcept = 0;
  virtual void narrow_and_round(std::uint16_t* out, float* in, std::int64_t count) noexcept = 0;

  // --- reductions, returned to the host (these wait for the compute stream). Deterministic: the
  // same result for any thread count or launch.
  virtual double sum_of_squares(const float* values, std::int64_t count) noexcept = 0;
  virtual bool all_finite(const float* values, std::int64_t count) noexcept = 0;
  virtual double sum(const float* values, std::int64_t count) noexcept = 0;  // in order, in double

  // --- values[i] *= factor, in place (a precision policy unscales gradients with it). Exact when
  // factor is a power of two.
  virtual void scale(float* values, float factor, std::int64_t count) noexcept = 0;
  // --- y[i] += alpha * x[i], in place (a phase controller moves weights along a direction with it):
  // the product is rounded, then the sum (no fused multiply-add), so every backend gives the same
  // bits. x may alias y.
  virtual void add_scaled(float* y, float alpha, const float* x, std::int64_t count) noexcept = 0;

  // --- elementwise (optional, since 9.0; check has()). Each output may alias any of its inputs, so
  // they run in place. Results are IEEE single precision, correctly rounded, the same bits on every
  // backend.
  //   sign: out = +1 for x > 0, -1 for x < 0, 0 for x = 0 (either sign), NaN for NaN.
  virtual void sign(float* /*out*/, const float* /*x*/, std::int64_t /*count*/) noexcept { unsupported(Op::sign); }
  //   mul: out = a * b.
  virtual void mul(float* /*out*/, const float* /*a*/, const float* /*b*/, std::int64_t /*count*/) noexcept {
    unsupported(Op::mul);
  }
  //   div: out = a / (b + eps): the sum is rounded, then the quotient (an Adam-style denominator).
  virtual void div(float* /*out*/, const float* /*a*/, const float* /*b*/, float /*eps*/,
                   std::int64_t /*count*/) noexcept {
    unsupported(Op::div);
  }
  //   sqrt: out = sqrt(x) (NaN for x < 0).
  virtual void sqrt(float* /*out*/, const float* /*x*/, std::int64_t /*count*/) noexcept { unsupported(Op::sqrt); }

  // --- memory.
  virtual void fill(void* data, std::uint8_t byte, std::uint64_t bytes) noexcept = 0;
  // Device to device, on the compute stream.
  virtual void copy(void* destination, const void* source, std::uint64_t bytes) noexcept = 0;
  // Between backend memory and host memory the caller owns; waits until the copy is done.
  virtual void copy_to_host(void* host_destination, const void* source, std::uint64_t bytes) noexcept = 0;
  virtual void copy_from_host(void* destination, const void* host_source, std::uint64_t bytes) noexcept = 0;

  // --- decoding with a KV cache (optional, since 9.2; check has()).
  //   rope_at: rope() (inverse = false) on `rows` consecutive positions of one sequence, the first
  //   at `first_position`: row r turns by position first_position + r.
  virtual void rope_at(float* /*x*/, std::int64_t /*rows*/, std::int64_t /*stride*/, std::int64_t /*first_position*/,
                       int /*n_heads*/, int /*head_dim*/, float /*theta*/) noexcept {
    unsupported(Op::rope_at);
  }
  //   attention_decode: writes the rows' keys and values (in.k, in.v, laid out as for attention)
  //   into the caches at positions [first_position, first_position + rows), then each query row r
  //   attends causally to cache positions 0..first_position + r: out (rows, n_head * head_dim) =
  //   softmax(q k^T / sqrt(head_dim)) v, grouped-query as attention_forward. Prefill (first_position
  //   0, rows = the prompt) and one-token decoding are the same call.
  virtual void attention_decode(const DecodeShape& /*shape*/, float* /*out*/, const AttentionInputs& /*in*/,
                                float* /*k_cache*/, float* /*v_cache*/) noexcept {
    unsupported(Op::attention_decode);
  }
  //   rope_frequencies: rope() with its inverse frequencies given (head_dim / 2 floats, host
  //   memory), as a scaled RoPE computes them (Llama 3's rope_scaling): row r turns by position
  //   first_position + r % seq_len. With theta^(-2i/head_dim) it is rope() (first_position 0) and
  //   rope_at (seq_len = rows), to the bit.
  virtual void rope_frequencies(float* /*x*/, std::int64_t /*rows*/, std::int64_t /*stride*/, std::int64_t /*seq_len*/,
                                std::int64_t /*first_position*/, int /*n_heads*/, int /*head_dim*/,
                                const float* /*inverse_frequencies*/, bool /*inverse*/) noexcept {
    unsupported(Op::rope_frequencies);
  }

  // --- matmuls on a bf16 input (optional, since 9.9; check has()): matmul_forward and
  // matmul_backward for a bf16 weight with `inp` given in bf16, as bf16 storage keeps an
  // activation. A backend offers them only where its bf16 products take bf16 operands, rounding an
  // f32 input (and dout) to bf16 first, as tensor cores do. Then they give the bits of those ops on
  // the input widened to f32, without the caller's widening or the backend's rounding, and a caller
  // may round an f32 input once for several products (the LM head's vocabulary chunks).
  virtual void matmul_forward_bf16_input(float* /*out*/, const std::uint16_t* /*inp*/, Weight /*weight*/,
                                         const float* /*bias*/, const MatmulShape& /*shape*/) noexcept {
    unsupported(Op::matmul_bf16_input);
  }
  virtual void matmul_backward_bf16_input(float* /*dinp*/, float* /*dweight*/, float* /*dbias*/, const float* /*dout*/,
                                          const std::uint16_t* /*inp*/, Weight /*weight*/, const MatmulShape& /*shape*/,
                                          GradientWrite /*dinp_write*/) noexcept {
    unsupported(Op::matmul_bf16_input);
  }

 protected:
  // An optional op the backend lacks was called without asking has(): a programming error.
  [[noreturn]] void unsupported(Op op) const noexcept {
    std::fprintf(stderr, "strata: op '%.*s' is not implemented by backend '%.*s' (check Ops::has before calling it)\n",
                 static_cast<int>(op_name(op).size()), op_name(op).data(), static_cast<int>(backend().size()),
                 backend().data());
    std::abort();
  }
};

}  // namespace strata
