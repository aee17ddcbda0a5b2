#pragma once
// The ops of the backend op table as data (docs/architecture.md, "Backends and the op table"): an
// op is an id (Op) and an argument record (strata::op::<Name>), and a backend runs a record it
// supports (Ops::run). Call sites use the typed wrappers of strata/ops.hpp, which fill the records.
//
// Records are frozen: within a major version a record's fields never change. An op that needs a
// field its record lacks is a new op with a new record, appended to Op (a minor version). Fields
// carry defaults that give the op's plain form, so a caller sets only what it uses.
//
// Pointers are the backend's memory (device memory on an accelerator) unless a field says host
// memory. Shapes are (rows, channels) row-major unless said otherwise; N = batch * seq_len. An op's
// outputs may not overlap its inputs unless the op says so ("may alias"); ops that update in place
// name the operand they update. Results a reduction returns to the host are fields of its record
// that the backend writes.
#include <cstdint>
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
// dtype (i8 and f16 today, u4 codes in a plugin's format), whose layout the plugin's quantizer
// describes: `scales` are its side data (f32 scales per group of group_size values for int8, the
// plugin's own bytes in general; null when there are none). No built-in backend reads those: the
// precision plugin that stores them brings their matmuls (strata/weight_quantizer.hpp).
struct Weight {
  const void* data = nullptr;
  DType dtype = DType::f32;
  const void* scales = nullptr;
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
// multi-head attention). head_dim is the family's own (n_head * head_dim need not be d_model).
//   window:    0, every earlier position of the sequence; w > 0, the w most recent positions, the
//              query's own included (Mistral's sliding window: key j is seen from query i when
//              i - w < j <= i).
//   documents: the sequence packs several documents; AttentionInputs::document_starts gives each
//              position's document start, and a query sees only keys of its own document.
// A kernel that cannot honour a window or documents refuses the shape in Kernel::check.
struct AttentionShape {
  int batch = 0;
  int seq_len = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int window = 0;
  bool documents = false;
};

// Decoding one sequence with a KV cache: `rows` new positions, the first at `first_position`; the
// caches hold `capacity` positions of (n_kv_head, head_dim) keys and values, contiguous,
// position-major. `window` as in AttentionShape.
struct DecodeShape {
  std::int64_t rows = 0;
  std::int64_t first_position = 0;
  std::int64_t capacity = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int window = 0;
};

struct AttentionInputs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  std::int64_t q_stride = 0;   // floats between consecutive positions of q
  std::int64_t kv_stride = 0;  // of k and v
  // With AttentionShape::documents: (N) positions, each the position within its sequence at which
  // its document starts (0 for the first document). Null otherwise.
  const std::int32_t* document_starts = nullptr;
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

// Whether gemm reads an operand as stored or transposed.
enum class Transpose : std::uint8_t { no, yes };

// Every op, for Ops::supports and Ops::run. Appended only: an id never changes within a major.
enum class Op : std::uint16_t {
  matmul_forward,
  matmul_backward,
  matmul_forward_bf16_input,
  matmul_backward_bf16_input,
  gemm,
  layernorm_forward,
  layernorm_backward,
  rmsnorm_forward,
  rmsnorm_backward,
  attention_sizes,
  attention_forward,
  attention_backward,
  attention_decode,
  gelu_forward,
  gelu_backward,
  swiglu_forward,
  swiglu_backward,
  geglu_forward,
  geglu_backward,
  rope,
  residual_forward,
  embedding_forward,
  embedding_backward,
  cross_entropy_forward_chunk,
  cross_entropy_finish,
  cross_entropy_backward_chunk,
  host_kernel,
  widen,
  narrow,
  narrow_and_round,
  sum_of_squares,
  all_finite,
  sum,
  scale,
  add_scaled,
  sign,
  mul,
  div,
  sqrt,
  fill,
  copy,
  copy_to_host,
  copy_from_host,
  qr,
  eigh,
  count
};

constexpr std::string_view op_name(Op op) noexcept {
  constexpr std::string_view names[] = {"matmul_forward",
                                        "matmul_backward",
                                        "matmul_forward_bf16_input",
                                        "matmul_backward_bf16_input",
                                        "gemm",
                                        "layernorm_forward",
                                        "layernorm_backward",
                                        "rmsnorm_forward",
                                        "rmsnorm_backward",
                                        "attention_sizes",
                                        "attention_forward",
                                        "attention_backward",
                                        "attention_decode",
                                        "gelu_forward",
                                        "gelu_backward",
                                        "swiglu_forward",
                                        "swiglu_backward",
                                        "geglu_forward",
                                        "geglu_backward",
                                        "rope",
                                        "residual_forward",
                                        "embedding_forward",
                                        "embedding_backward",
                                        "cross_entropy_forward_chunk",
                                        "cross_entropy_finish",
                                        "cross_entropy_backward_chunk",
                                        "host_kernel",
                                        "widen",
                                        "narrow",
                                        "narrow_and_round",
                                        "sum_of_squares",
                                        "all_finite",
                                        "sum",
                                        "scale",
                                        "add_scaled",
                                        "sign",
                                        "mul",
                                        "div",
                                        "sqrt",
                                        "fill",
                                        "copy",
                                        "copy_to_host",
                                        "copy_from_host",
                                        "qr",
                                        "eigh"};
  static_assert(std::size(names) == static_cast<std::size_t>(Op::count));
  return op < Op::count ? names[static_cast<std::size_t>(op)] : "unknown";
}

namespace op {

// --- matmuls. out (N, out) = inp (N, in) @ W (+ bias). bf16 weights: both layouts; a backend may
// widen them into `scratch` chunk by chunk. Backward: dinp per dinp_write; dweight and dbias (either
// may be null) accumulate.
struct MatmulForward {
  static constexpr Op id = Op::matmul_forward;
  float* out = nullptr;
  const float* inp = nullptr;
  Weight weight;
  const float* bias = nullptr;
  MatmulShape shape;
  Scratch scratch;
};
struct MatmulBackward {
  static constexpr Op id = Op::matmul_backward;
  float* dinp = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
  const float* dout = nullptr;
  const float* inp = nullptr;
  Weight weight;
  MatmulShape shape;
  Scratch scratch;
  GradientWrite dinp_write = GradientWrite::accumulate;
};

// The two matmuls for a bf16 weight with `inp` given in bf16, as bf16 storage keeps an activation.
// A backend offers them only where its bf16 products take bf16 operands, rounding an f32 input (and
// dout) to bf16 first, as tensor cores do. Then they give the bits of the f32-input ops on the input
// widened to f32, and a caller may round an f32 input once for several products.
struct MatmulForwardBf16Input {
  static constexpr Op id = Op::matmul_forward_bf16_input;
  float* out = nullptr;
  const std::uint16_t* inp = nullptr;
  Weight weight;
  const float* bias = nullptr;
  MatmulShape shape;
};
struct MatmulBackwardBf16Input {
  static constexpr Op id = Op::matmul_backward_bf16_input;
  float* dinp = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
  const float* dout = nullptr;
  const std::uint16_t* inp = nullptr;
  Weight weight;
  MatmulShape shape;
  GradientWrite dinp_write = GradientWrite::accumulate;
};

// General matrix product, row-major: c (m, n) = alpha op(a) (m, k) @ op(b) (k, n) + beta c, with
// op(x) = x or its transpose. a and b are both f32 or both bf16 (`operands`); c is f32, and the
// products accumulate in f32. lda, ldb and ldc are the floats (or bf16 values) between consecutive
// rows of a, b and c as stored. With beta = 0, c is written without being read (NaN in c does not
// propagate). Deterministic: the same bits for the same call on one backend.
struct Gemm {
  static constexpr Op id = Op::gemm;
  Transpose transpose_a = Transpose::no;
  Transpose transpose_b = Transpose::no;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  float alpha = 1.0f;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  DType operands = DType::f32;
  float beta = 0.0f;
  float* c = nullptr;
  std::int64_t ldc = 0;
};

// --- normalisations. mean/rstd are (N), kept for backward. Backward adds into dinp, dweight, dbias.
struct LayernormForward {
  static constexpr Op id = Op::layernorm_forward;
  float* out = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  const float* inp = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  float eps = 1e-5f;
};
struct LayernormBackward {
  static constexpr Op id = Op::layernorm_backward;
  float* dinp = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
  const float* dout = nullptr;
  const float* inp = nullptr;
  const float* weight = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  std::int64_t rows = 0;
  std::int64_t channels = 0;
};
// RMSNorm: out = inp * rstd * (weight_offset + weight), rstd = 1 / sqrt(mean(inp^2) + eps).
// weight_offset is 0 for LLaMA, 1 for Gemma (whose gains are stored as w with the scale 1 + w).
struct RmsnormForward {
  static constexpr Op id = Op::rmsnorm_forward;
  float* out = nullptr;
  float* rstd = nullptr;
  const float* inp = nullptr;
  const float* weight = nullptr;
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  float eps = 1e-5f;
  float weight_offset = 0.0f;
};
struct RmsnormBackward {
  static constexpr Op id = Op::rmsnorm_backward;
  float* dinp = nullptr;
  float* dweight = nullptr;
  const float* dout = nullptr;
  const float* inp = nullptr;
  const float* weight = nullptr;
  const float* rstd = nullptr;
  std::int64_t rows = 0;
  std::int64_t channels = 0;
  float weight_offset = 0.0f;
};

// --- attention (causal). The backend's own kernel: `saved` holds saved_floats kept for backward;
// backward uses scratch_floats of scratch and adds into the gradients. attention_sizes answers the
// two counts for a shape (no device work).
struct AttentionSizes {
  static constexpr Op id = Op::attention_sizes;
  AttentionShape shape;
  std::int64_t saved_floats = 0;    // written by the backend
  std::int64_t scratch_floats = 0;  // written by the backend
};
struct AttentionForward {
  static constexpr Op id = Op::attention_forward;
  AttentionShape shape;
  float* out = nullptr;
  float* saved = nullptr;
  AttentionInputs in;
};
struct AttentionBackward {
  static constexpr Op id = Op::attention_backward;
  AttentionShape shape;
  AttentionGrads grads;
  const float* dout = nullptr;
  AttentionInputs in;
  const float* saved = nullptr;
  float* scratch = nullptr;
};
// Writes the rows' keys and values (in.k, in.v, laid out as for attention) into the caches at
// positions [first_position, first_position + rows), then each query row r attends causally to
// cache positions 0..first_position + r (within the window): out (rows, n_head * head_dim) =
// softmax(q k^T / sqrt(head_dim)) v, grouped-query as attention. Prefill and one-token decoding are
// the same call.
struct AttentionDecode {
  static constexpr Op id = Op::attention_decode;
  DecodeShape shape;
  float* out = nullptr;
  AttentionInputs in;
  float* k_cache = nullptr;
  float* v_cache = nullptr;
};

// --- pointwise. GELU is the tanh approximation. SwiGLU: out = silu(gate) * up; GeGLU: out =
// gelu(gate) * up (Gemma's, with the tanh GELU); over count elements. Backward writes dinp, or
// dgate and dup, per `write`.
struct GeluForward {
  static constexpr Op id = Op::gelu_forward;
  float* out = nullptr;
  const float* inp = nullptr;
  std::int64_t count = 0;
};
struct GeluBackward {
  static constexpr Op id = Op::gelu_backward;
  float* dinp = nullptr;
  const float* inp = nullptr;
  const float* dout = nullptr;
  std::int64_t count = 0;
  GradientWrite write = GradientWrite::accumulate;
};
struct SwigluForward {
  static constexpr Op id = Op::swiglu_forward;
  float* out = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  std::int64_t count = 0;
};
struct SwigluBackward {
  static constexpr Op id = Op::swiglu_backward;
  float* dgate = nullptr;
  float* dup = nullptr;
  const float* dout = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  std::int64_t count = 0;
  GradientWrite write = GradientWrite::accumulate;
};
struct GegluForward {
  static constexpr Op id = Op::geglu_forward;
  float* out = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  std::int64_t count = 0;
};
struct GegluBackward {
  static constexpr Op id = Op::geglu_backward;
  float* dgate = nullptr;
  float* dup = nullptr;
  const float* dout = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  std::int64_t count = 0;
  GradientWrite write = GradientWrite::accumulate;
};

// RoPE in Hugging Face's rotate_half layout, in place on x (rows, n_heads, head_dim) whose rows are
// `stride` floats apart: for i < head_dim/2, the pair (x[i], x[i + head_dim/2]) turns by
// position * f_i. f_i = theta^(-2i/head_dim), or inverse_frequencies[i] when given (head_dim / 2
// floats in host memory: a scaled RoPE, Llama 3's rope_scaling). Row r's position is
// positions[r] when given ((rows) positions in backend memory: packed documents restart at 0),
// else first_position + r % seq_len. inverse = true turns back, which is the backward pass (the
// rotation is orthogonal).
struct Rope {
  static constexpr Op id = Op::rope;
  float* x = nullptr;
  std::int64_t rows = 0;
  std::int64_t stride = 0;
  std::int64_t seq_len = 0;
  std::int64_t first_position = 0;
  int n_heads = 0;
  int head_dim = 0;
  float theta = 10000.0f;
  const float* inverse_frequencies = nullptr;
  const std::int32_t* positions = nullptr;
  bool inverse = false;
};
struct ResidualForward {
  static constexpr Op id = Op::residual_forward;
  float* out = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  std::int64_t count = 0;
};

// --- embedding: out (B,T,C) = scale * wte[token] (+ wpe[position] when wpe is not null); the tables
// share a dtype. A position is positions[b, t] when given ((B,T) in backend memory: packed
// documents restart at 0), else t. scale is 1, or Gemma's sqrt(d_model) rounded to f32. Backward
// adds scale * dout into dwte and dout into dwpe (null: no position table).
struct EmbeddingForward {
  static constexpr Op id = Op::embedding_forward;
  float* out = nullptr;
  const std::int32_t* tokens = nullptr;
  Weight wte;
  Weight wpe;
  std::int64_t batch = 0;
  std::int64_t seq_len = 0;
  std::int64_t channels = 0;
  const std::int32_t* positions = nullptr;
  float scale = 1.0f;
};
struct EmbeddingBackward {
  static constexpr Op id = Op::embedding_backward;
  float* dwte = nullptr;
  float* dwpe = nullptr;
  const float* dout = nullptr;
  const std::int32_t* tokens = nullptr;
  std::int64_t batch = 0;
  std::int64_t seq_len = 0;
  std::int64_t channels = 0;
  const std::int32_t* positions = nullptr;
  float scale = 1.0f;
};

// --- cross-entropy over vocabulary chunks of a (rows, width) logits block whose columns are
// vocabulary ids [first, first + width): the forward keeps a running max and sum per row (the
// running rows start however the first chunk finds them), finish turns them into loss and
// log-sum-exp. Columns >= vocab are padding. Backward writes the chunk's dlogits (may alias
// logits), times dloss. A negative target marks a row with no target (a masked prompt token,
// padding): its loss and its dlogits are 0.
struct CrossEntropyForwardChunk {
  static constexpr Op id = Op::cross_entropy_forward_chunk;
  float* running_max = nullptr;
  float* running_sum = nullptr;
  float* target_logits = nullptr;
  const float* logits = nullptr;
  const std::int32_t* targets = nullptr;
  std::int64_t rows = 0;
  std::int64_t first = 0;
  std::int64_t width = 0;
  std::int64_t vocab = 0;
};
struct CrossEntropyFinish {
  static constexpr Op id = Op::cross_entropy_finish;
  float* losses = nullptr;
  float* logsumexp = nullptr;
  const float* running_max = nullptr;
  const float* running_sum = nullptr;
  const float* target_logits = nullptr;
  const std::int32_t* targets = nullptr;
  std::int64_t rows = 0;
};
struct CrossEntropyBackwardChunk {
  static constexpr Op id = Op::cross_entropy_backward_chunk;
  float* dlogits = nullptr;
  const float* logits = nullptr;
  const float* logsumexp = nullptr;
  const std::int32_t* targets = nullptr;
  float dloss = 1.0f;
  std::int64_t rows = 0;
  std::int64_t first = 0;
  std::int64_t width = 0;
  std::int64_t vocab = 0;
};

// --- a plugin's own host code over backend memory: `run(context)`, in order with the ops before and
// after it. Supported where the host's cores can address the backend's memory (the CPU backend, and
// a backend's host table during an update of offloaded rows), so a plugin with CPU kernels (an
// optimizer's update) runs them as an op, wherever the op table computes: a backend that seals its
// memory opens it for the call; `strata plan`'s dry run skips it and prices `work` elements of
// `name` ("adamw_update") by the calibration. The callee must not throw.
struct HostKernel {
  static constexpr Op id = Op::host_kernel;
  void (*run)(void* context) noexcept = nullptr;
  void* context = nullptr;
  const char* name = "";
  double work = 0.0;  // elements it passes over, for pricing
};

// --- conversions. narrow rounds f32 to bf16 (nearest even); narrow_and_round also writes the
// rounded values back into the f32 source, so the values computed on and the values stored agree.
struct Widen {
  static constexpr Op id = Op::widen;
  float* out = nullptr;
  const std::uint16_t* in = nullptr;
  std::int64_t count = 0;
};
struct Narrow {
  static constexpr Op id = Op::narrow;
  std::uint16_t* out = nullptr;
  const float* in = nullptr;
  std::int64_t count = 0;
};
struct NarrowAndRound {
  static constexpr Op id = Op::narrow_and_round;
  std::uint16_t* out = nullptr;
  float* in = nullptr;
  std::int64_t count = 0;
};

// --- reductions, returned to the host in `result` (they wait for the compute stream, so they are
// the synchronisation points of a step). Deterministic: the same result for any thread count or
// launch. sum adds in order, in double.
struct SumOfSquares {
  static constexpr Op id = Op::sum_of_squares;
  const float* values = nullptr;
  std::int64_t count = 0;
  double result = 0.0;
};
struct AllFinite {
  static constexpr Op id = Op::all_finite;
  const float* values = nullptr;
  std::int64_t count = 0;
  bool result = false;
};
struct Sum {
  static constexpr Op id = Op::sum;
  const float* values = nullptr;
  std::int64_t count = 0;
  double result = 0.0;
};

// --- in place and elementwise. scale: values *= factor (exact when factor is a power of two).
// add_scaled: y += alpha x, the product rounded, then the sum (no fused multiply-add), so every
// backend gives the same bits; x may alias y. sign, mul, div, sqrt: each output may alias any of its
// inputs; IEEE single precision, correctly rounded, the same bits on every backend.
//   sign: +1 for x > 0, -1 for x < 0, 0 for x = 0 (either sign), NaN for NaN.
//   div:  a / (b + eps): the sum is rounded, then the quotient (an Adam-style denominator).
//   sqrt: NaN for x < 0.
struct Scale {
  static constexpr Op id = Op::scale;
  float* values = nullptr;
  float factor = 1.0f;
  std::int64_t count = 0;
};
struct AddScaled {
  static constexpr Op id = Op::add_scaled;
  float* y = nullptr;
  float alpha = 1.0f;
  const float* x = nullptr;
  std::int64_t count = 0;
};
struct Sign {
  static constexpr Op id = Op::sign;
  float* out = nullptr;
  const float* x = nullptr;
  std::int64_t count = 0;
};
struct Mul {
  static constexpr Op id = Op::mul;
  float* out = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  std::int64_t count = 0;
};
struct Div {
  static constexpr Op id = Op::div;
  float* out = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
  float eps = 0.0f;
  std::int64_t count = 0;
};
struct Sqrt {
  static constexpr Op id = Op::sqrt;
  float* out = nullptr;
  const float* x = nullptr;
  std::int64_t count = 0;
};

// --- memory. copy: backend to backend memory, on the compute stream. copy_to_host and
// copy_from_host: between backend memory and host memory the caller owns; they wait until done.
struct Fill {
  static constexpr Op id = Op::fill;
  void* data = nullptr;
  std::uint8_t byte = 0;
  std::uint64_t bytes = 0;
};
struct Copy {
  static constexpr Op id = Op::copy;
  void* destination = nullptr;
  const void* source = nullptr;
  std::uint64_t bytes = 0;
};
struct CopyToHost {
  static constexpr Op id = Op::copy_to_host;
  void* host_destination = nullptr;
  const void* source = nullptr;
  std::uint64_t bytes = 0;
};
struct CopyFromHost {
  static constexpr Op id = Op::copy_from_host;
  void* destination = nullptr;
  const void* host_source = nullptr;
  std::uint64_t bytes = 0;
};

// --- small dense linear algebra, f32 (the CPU through the system's LAPACK, CUDA through cuSOLVER).
// Deterministic on one backend; signs are fixed so that the factors are unique, and both backends
// agree to rounding.
//   qr: a (rows, cols), rows >= cols, row-major, becomes the thin Q (rows, cols) with orthonormal
//       columns; r (cols, cols), when not null, receives the upper-triangular R with a non-negative
//       diagonal, so that A = Q R.
//   eigh: a (n, n), symmetric, row-major, becomes its eigenvectors as columns (a[i * n + j] is
//       component i of vector j), each with its largest-magnitude component positive (the first
//       such component on a tie); values (n) receives the eigenvalues in ascending order. A matrix
//       the solver cannot factor (NaN or infinite entries) gives NaN in both.
struct Qr {
  static constexpr Op id = Op::qr;
  float* a = nullptr;
  float* r = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};
struct Eigh {
  static constexpr Op id = Op::eigh;
  float* a = nullptr;
  float* values = nullptr;
  std::int64_t n = 0;
};

}  // namespace op

}  // namespace strata
