#pragma once
// What every transformer family shares, so that a family file holds only its math. A family's
// constructor describes its tensors once (FamilyTensors: parameters with Hugging Face names,
// activations, workspace) and declare() adds the rows in the one order every family uses. Its
// block forward and backward are then one op call per line through the wrappers below, which
// find the rows, widen and round bf16 activations, and time each kernel. llm.c's gpt2_forward is
// the model: the kernel calls are the code, and the bookkeeping lives here.
//
// Ids. A family numbers its block parameters, global parameters, block activations and workspace
// rows with plain enums (core/model/gpt2/gpt2_model.hpp); the wrappers take those numbers.
// kBlockInput names the block's input (the previous block's output, or the embedding).
//
// bf16 activations. Each bf16 activation kind computes in its own f32 staging row. An op's output
// kind is marked written; the first read of a written kind rounds it (narrow_and_round: the bf16
// row and the staging then hold the same values), and a block's last act rounds whatever is left,
// so what later kernels read equals what backward will widen. The first read of a kind the
// staging does not hold widens it from its bf16 row. Every block entry point (forward, backward,
// the head) starts from nothing held, so nothing depends on what ran before.
//
// Recomputation. Model::recompute_missing_activations re-allocates what the checkpoint strategy
// dropped and marks it; the block's backward recomputes each marked kind right above the code
// that reads it (`if (recompute(l, A::ln2)) layernorm(...)`): the same op on the same inputs, so
// the values are bitwise those of the forward pass.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/model.hpp"
#include "strata/kernel.hpp"

namespace strata {

inline constexpr int kBlockInput = -1;
inline constexpr int kNoBias = -1;

// norm: a norm gain or bias, whose kernels always write a gradient (a frozen one's goes to the
// sink); weight: a matrix or a bias (a frozen one has no gradient, and its op skips it); embedding:
// a table whose rows are looked up (as weight, for gradients). Optimizers see them as ParamKind.
enum class ParameterKind : std::uint8_t { weight, norm, embedding };

struct ParameterSpec {
  std::string name;  // within a block, after its prefix ("attn.c_attn.weight"); global: the whole name
  std::vector<std::int64_t> shape;
  ParameterKind kind = ParameterKind::weight;
  bool trains = true;  // globals only; a block's parameters train as the plan says
};

struct RowSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  bool stays_f32 = false;  // activations: kept f32 under bf16 storage (norm statistics, attention's saved rows)
};

struct FamilyTensors {
  std::vector<ParameterSpec> globals;  // in table order; the head weight is one of them
  std::string block_prefix;            // "h." names block 3's parameters "h.3.<name>"
  WeightLayout block_layout = WeightLayout::out_in;
  std::vector<ParameterSpec> block;  // one block's, in the family's enum order
  std::vector<AdapterTarget> adapter_targets;
  std::vector<RowSpec> global_activations;  // after act.tokens and act.targets, in enum order
  std::vector<RowSpec> activations;         // one block's, in enum order
  int output = -1;                          // the block output's kind (the next block's input)
  // The kinds the block's backward recomputes by itself when a strategy drops only them, each with
  // the op that recomputes it ("layernorm", "gelu", "attention"); strategies choose among them
  // (HookContext::tensors, drop_activation_tensors).
  std::vector<std::pair<int, std::string>> recomputed_alone;
  std::vector<RowSpec> workspace;  // backward scratch, declared when the model trains; then
                                   // declare() adds ws.d_attention, the attention kernel's
  double rope_theta = 10000.0;     // for families with rotary positions
  // A scaled RoPE's inverse frequencies (head_dim / 2); empty: theta^(-2i/head_dim).
  std::vector<float> rope_inverse_frequencies;
  int vocab = 0;
  int padded_vocab = 0;  // the LM head's rows in memory (the config's padded_vocab())
};

class Transformer : public Model {
 public:
  int n_layer() const noexcept final { return n_layer_; }
  int seq_len() const noexcept final { return attention_shape_.seq_len; }
  // A block parameter's f32 values (the master copy under bf16 or int8 storage).
  TensorView parameter_values(int layer, int which) const { return store_.values(parameter(layer, which)); }

  void layer_forward(int layer) final;
  void layer_backward(int layer) final;
  double head_forward() final;
  void head_backward(float dloss) final;
  std::vector<float> decode(std::span<const std::int32_t> tokens, std::int64_t first_position, KvCache& cache) final;

 protected:
  // d_model: the residual stream's width (n_head * head_dim unless the family sets its own head_dim).
  Transformer(Backend& backend, Kernel& attention, const ModelOptions& options, const AttentionShape& shape,
              int n_layer, int d_model);
  // Adds every row the family describes, in the order all families share (parameters, adapters,
  // tokens, global activations, the head's rows, block activations, workspace, bf16 staging,
  // weight scratch); allocates the persistent rows when options.allocation says so.
  void declare(const FamilyTensors& tensors, const ModelOptions& options);

  // A global parameter that is another (a head tied to the embedding): `alias` reads `target`.
  void tie_global(int alias, int target);

  // --- the family's math.
  virtual void block_forward(int l) = 0;
  virtual void block_backward(int l) = 0;  // d(output) in, d(input) out, both in the same workspace row
  virtual const float* final_norm() = 0;   // the final norm's (N, C) output, the head's input
  virtual int head_weight_row() const = 0;
  virtual void final_backward(float dloss) = 0;

  // --- accessors, one convention for every family.
  const ParameterRows& parameter(int layer, int which) const {
    return parameters()[static_cast<std::size_t>(
        block_parameters_[static_cast<std::size_t>(layer)][static_cast<std::size_t>(which)])];
  }
  const ParameterRows& global(int which) const {
    return parameters()[static_cast<std::size_t>(global_parameters_[static_cast<std::size_t>(which)])];
  }
  const float* value(int layer, int which) const { return store_.values(parameter(layer, which)).f32(); }
  const float* global_value(int which) const { return store_.values(global(which)).f32(); }
  float* grad(int layer, int which) const { return gradient(parameter(layer, which), block_kinds_[which]); }
  float* global_grad(int which) const { return gradient(global(which), global_kinds_[which]); }
  float* ws(int which) const { return store_.f32(workspace_rows_.at(static_cast<std::size_t>(which))); }
  float* global_activation(int which) const { return store_.f32(family_global_rows_[static_cast<std::size_t>(which)]); }
  std::int64_t elements(int row) const { return table().row(row).elements(); }
  std::int64_t workspace_elements(int which) const {
    return elements(workspace_rows_.at(static_cast<std::size_t>(which)));
  }
  // N = B * T; while decoding, the step's new positions.
  std::int64_t rows() const { return decoding_ ? decoding_->rows : static_cast<std::int64_t>(batch_) * seq_len(); }
  // T for the embedding; while decoding, the step's new positions.
  std::int64_t positions() const { return decoding_ ? decoding_->rows : seq_len(); }
  // A learned position table (GPT-2's wpe) from the decoding step's first position on.
  Weight position_table(Weight table) const;
  const AttentionShape& attention_shape() const noexcept { return attention_shape_; }
  // Where an op reads kind `kind` of block `l` (kBlockInput: the block's input), widened if needed.
  const float* in(int l, int kind);
  // Where an op writes kind `kind` of block `l`; the value is rounded into bf16 when next read.
  float* out(int l, int kind);

  // --- ops on a block's activations: one kernel each (and a matmul's adapters), timed.
  void layernorm(int l, int out, int mean, int rstd, int x, int weight, int bias, float eps);
  // The gain is weight_offset + w (Gemma's 1 + w; 0 for LLaMA's w).
  void rmsnorm(int l, int out, int rstd, int x, int weight, float eps, float weight_offset = 0.0f);
  void linear(int l, int out, int x, int weight, int bias = kNoBias);  // out (N, out) = x (N, in) @ W + b
  void rope(int l, int x, int heads);                                  // in place
  void attention(int l, int out, int saved, const AttentionInputs& qkv);
  void gelu(int l, int out, int x);
  void swiglu(int l, int out, int gate, int up);
  void geglu(int l, int out, int gate, int up);
  void residual(int l, int x, int skip);  // x += skip, in place
  void identity(int l);                   // a skipped block: output = input
  // Backward: gradients are workspace rows; each op's parameter gradients accumulate.
  void linear_backward(int l, float* dx, GradientWrite write, const float* dy, int x, int weight, int bias = kNoBias);
  void layernorm_backward(int l, float* dx, const float* dy, int x, int weight, int bias, int mean, int rstd);
  void rmsnorm_backward(int l, float* dx, const float* dy, int x, int weight, int rstd, float weight_offset = 0.0f);
  void gelu_backward(int l, float* dx, const float* dy, int x);
  void swiglu_backward(int l, float* dgate, float* dup, const float* dy, int gate, int up);
  void geglu_backward(int l, float* dgate, float* dup, const float* dy, int gate, int up);
  void attention_backward(int l, const AttentionGrads& grads, const float* dy, int out, int saved,
                          const AttentionInputs& qkv);
  void rope_backward(float* dx, std::int64_t stride, int heads);  // the inverse rotation, in place
  void zero(int workspace) { store_.zero(ws(workspace), workspace_elements(workspace)); }

  Kernel& attention_;

 private:
  float* gradient(const ParameterRows& rows, ParameterKind kind) const {
    return kind == ParameterKind::norm ? norm_grad_of(rows) : grad_of(rows);
  }
  int row(int l, int kind) const { return kind == kBlockInput ? input_row(l) : activation_row(l, kind); }
  int input_row(int l) const { return l == 0 ? family_global_rows_[0] : layer_output_row(l - 1); }
  std::int64_t width(int l, int kind) const { return table().row(row(l, kind)).shape.back(); }
  Weight weight_of(int layer, int which) const { return store_.weight(parameter(layer, which).param); }
  MatmulShape matmul_shape(int layer, int weight) const;
  void settle(int kind);
  // Kind `kind` of block `l` as its bf16 row holds it (settled), where the matmul with weight
  // `weight` can read it as is (Ops' matmul_bf16_input); null where it cannot: f32 storage, the
  // first block's f32 input, a weight not in bf16, adapters on the weight, a backend without the op.
  const std::uint16_t* bf16_input(int l, int kind, int weight);
  void round_written();  // rounds every kind still marked written
  void forget_staging();

  // Per staged kind (and the input, last): what its f32 staging row holds.
  enum class Held : std::uint8_t { nothing, value, written };
  struct Staging {
    int row = -1;  // -1: the kind is f32
    Held held = Held::nothing;
    int layer = -1;
  };
  Staging& staging(int kind) { return staging_[static_cast<std::size_t>(kind == kBlockInput ? input_kind_ : kind)]; }

  // A decode() step in progress: rows() and positions() are its new positions, rope turns them from
  // first_position, and attention extends and reads the cache.
  struct Decoding {
    std::int64_t rows;
    std::int64_t first_position;
    KvCache* cache;
  };
  std::optional<Decoding> decoding_;
  int n_layer_ = 0;
  std::int64_t d_model_ = 0;
  AttentionShape attention_shape_;
  std::vector<ParameterKind> block_kinds_, global_kinds_;
  std::vector<int> global_parameters_;  // indices into parameters()
  std::vector<std::vector<int>> block_parameters_;
  std::vector<int> family_global_rows_;  // the family's global activations; [0], the embedding output,
                                         // is the first block's input
  std::vector<int> workspace_rows_;
  std::vector<Staging> staging_;
  int attention_scratch_ = -1;  // a workspace row
  float rope_theta_ = 10000.0f;
  std::vector<float> rope_frequencies_;  // FamilyTensors::rope_inverse_frequencies
  int input_kind_ = 0;                   // staging_'s last entry: the block input's
};

}  // namespace strata
