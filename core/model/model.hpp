#pragma once
// The interface the executor drives (docs/architecture.md, "Models"): a model family declares its
// parameter, gradient, optimizer-state, activation and workspace rows in a TensorStore, and runs one
// explicit forward and backward per piece (embedding, block, head) through the backend's ops. This
// base class holds what the executor needs of any model: the store, the micro batch's token rows,
// per-layer activation bookkeeping and the chunked LM head; core/model/transformer.hpp holds what
// the transformer families share. One folder per family: core/model/gpt2, core/model/llama,
// core/model/qwen2.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/activation_codes.hpp"
#include "core/model/lm_head.hpp"
#include "core/model/model_adapters.hpp"
#include "core/model/trainable_plan.hpp"
#include "core/tensor/tensor_store.hpp"
#include "core/util/profiler.hpp"
#include "strata/host_services.hpp"
#include "strata/optimizer.hpp"
#include "strata/precision_policy.hpp"

namespace strata {

class KvCache;  // core/model/kv_cache.hpp

// Storage dtypes, as the precision policy chooses them. bf16 weights: the matrices are stored as
// bf16 beside an f32 master copy counted as optimizer state; norm gains and biases stay f32. bf16
// activations: the block activations kept for backward are stored as bf16 and widened into f32
// staging rows where kernels read them; norm statistics and the attention kernel's saved rows
// stay f32, as do the global activations.
// Quantized weights (int8): the blocks' matrices are stored in the quantizer's dtype with f32 scales
// beside an f32 master; the embedding tables (and an untied LM head) use `embeddings`.
struct StorageTypes {
  StorageTypes() = default;
  StorageTypes(DType weights_, DType activations_, std::optional<DType> embeddings_ = std::nullopt,
               WeightQuantizer* quantizer_ = nullptr)
      : weights(weights_), activations(activations_), embeddings(embeddings_), quantizer(quantizer_) {}

  DType weights = DType::f32;
  DType activations = DType::f32;
  std::optional<DType> embeddings;       // unset: as `weights`
  WeightQuantizer* quantizer = nullptr;  // set when `weights` is quantized
  std::string quantizer_label;           // how a crash in its kernels names it
  Bf16Rounding* rounding = nullptr;      // bf16 storage rounded by the precision policy, not to nearest
  // The strategies' activation codecs, in manifest order (a model that trains codes what they take).
  std::vector<StrategyCodec> codecs;

  DType embedding_storage() const noexcept { return embeddings.value_or(weights); }
};

inline StorageTypes storage_types(PrecisionPolicy& precision) {
  StorageTypes types{precision.weight_storage(), precision.activation_storage(), precision.embedding_storage(),
                     precision.weight_quantizer()};
  types.rounding = precision.bf16_rounding();
  return types;
}

// The state an optimizer keeps per parameter (Optimizer::state_layout); empty: none (evaluation).
using OptimizerStateLayout = std::function<StateLayout(const ParamInfo& param)>;

inline OptimizerStateLayout state_layout_of(const Optimizer& optimizer) {
  return [&optimizer](const ParamInfo& param) { return optimizer.state_layout(param); };
}
// `buffers` f32 buffers of the parameter's length (AdamW's two moments), for tests and tools.
inline OptimizerStateLayout f32_state_layout(int buffers) {
  return [buffers](const ParamInfo& param) { return f32_state(buffers, param.count); };
}

// What a model is built for: evaluation declares no gradients, optimizer state or backward
// workspace, so none is ever allocated.
enum class Purpose : std::uint8_t { training, evaluation };

struct ModelOptions {
  int batch = 1;  // micro-batch rows
  OptimizerStateLayout optimizer_state;
  Allocation allocation = Allocation::now;
  StorageTypes storage;
  Purpose purpose = Purpose::training;
  TrainablePlan trainable;  // what trains (all of it by default) and which blocks are skipped
};

// Options for a model that trains everything, allocated now (tests and tools).
inline ModelOptions model_options(int batch, OptimizerStateLayout optimizer_state = {}, StorageTypes storage = {}) {
  ModelOptions options;
  options.batch = batch;
  options.optimizer_state = std::move(optimizer_state);
  options.storage = storage;
  return options;
}

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // --- what the model is.
  virtual std::string_view arch() const noexcept = 0;  // "gpt2", "llama"
  virtual ModelInfo info() const = 0;
  // The shape as checkpoints record it (trainer.json "model"): a resume must match it exactly.
  virtual nlohmann::json config_json() const = 0;
  virtual int n_layer() const noexcept = 0;
  virtual int seq_len() const noexcept = 0;
  int batch() const noexcept { return batch_; }  // the micro-batch size activations are sized for

  TensorStore& store() noexcept { return store_; }
  const TensorStore& store() const noexcept { return store_; }
  const TensorTable& table() const noexcept { return store_.table(); }
  const std::vector<ParameterRows>& parameters() const noexcept { return store_.parameters(); }
  Backend& backend() noexcept { return store_.backend(); }
  Profiler& profiler() noexcept { return profiler_; }
  // What trains and which blocks are skipped (ModelOptions::trainable).
  const TrainablePlan& trainable() const noexcept { return trainable_; }

  // --- checkpoints. Parameters are named as the family's Hugging Face files name them; the
  // stored shape may be smaller than the row (padded vocabulary rows are never stored).
  virtual std::vector<std::int64_t> stored_shape(const ParameterRows& rows) const;
  // Names a file may use for a parameter, tried in order.
  virtual std::vector<std::string> file_names(const ParameterRows& rows) const { return {rows.name}; }
  // File tensors that belong to this family's format but are not loaded (tied heads, buffers).
  virtual bool ignorable_file_tensor(std::string_view /*name*/) const { return false; }
  // The family's initialisation, then each adapter's (LoRA: A random, B zero); weights published.
  void init_weights(std::uint64_t seed);
  // Each adapter's initialisation alone, weights published: for a run whose base weights all come
  // from a file read next (a Hugging Face directory, whose load refuses a missing tensor), where
  // the family's random draws would only be overwritten (minutes for a 7B). The base rows hold
  // their allocation's zeros until then.
  void init_adapters(std::uint64_t seed);
  // What init_weights writes, rows, allocations and publication alike, with every base value 0
  // and nothing drawn: the planner's dry run (core/planner/), which needs the path, not the values.
  void init_weights_as_zeros(std::uint64_t seed);
  // A parameter's values as the matmuls see them, on the host, in its stored shape: the f32 value
  // row, a bf16 row widened, or a quantized matrix dequantized by its own matmul (an identity
  // input), so an exported int8 base is the one training computed with.
  std::vector<float> effective_values(const ParameterRows& rows);
  // A block matrix with its adapters folded in (effective_values otherwise): `strata export --merge`.
  std::vector<float> merged_values(const ParameterRows& rows);
  bool adapted(const ParameterRows& rows) const { return adapters_.adapts(rows.param); }
  // What identifies the frozen parameters (a checkpoint leaves them out and records this): a hash
  // of each one's name and stored bytes (values in their storage dtype, then scales), in table
  // order; empty when none is frozen. Computed once and kept until a frozen parameter is written.
  std::string frozen_fingerprint();
  // The planned adapters, "qkv: lora rank 8 alpha 16, fc: ..."; empty without any.
  std::string adapter_description() const { return adapters_.description(); }
  // Writes values.size() elements of a parameter's f32 value from host memory, from element `first`
  // on: into its f32 value row (the master copy, when there is one), or, for a weight without a
  // master copy (a model built for evaluation), into its storage: rounded to bf16, or quantized
  // whole. The caller publishes the weights afterwards.
  void write_values(const ParameterRows& rows, std::span<const float> values, std::size_t first = 0);
  // Whether write_values takes a slice of the parameter (f32 and bf16 values do; quantized storage
  // takes the whole tensor at once).
  bool writes_value_slices(const ParameterRows& rows) const noexcept {
    return rows.master >= 0 || store_.writes_stored_slices(rows);
  }

  // --- the step, piece by piece.
  void begin_micro_batch(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets);
  void end_micro_batch();
  virtual void embed_forward() = 0;
  void allocate_layer_activations(int layer);
  // keep_output: the block's output is the next block's input, kept by activation checkpointing.
  void free_layer_activations(int layer, bool keep_output);
  bool layer_activations_present(int layer) const;  // a skipped block's: its output
  bool layer_output_kept(int layer) const { return store_.residency().allocated(layer_output_row(layer)); }
  int layer_output_row(int layer) const { return activation_row(layer, output_kind_); }
  // A block's activation rows, in kind order, its output among them (a skipped block holds only
  // its output; the others stay unallocated).
  const std::vector<int>& layer_activation_rows(int layer) const {
    return layer_activation_rows_.at(static_cast<std::size_t>(layer));
  }
  // Its activation rows and their code rows (activation_codes.hpp): what moves with the block.
  std::vector<int> layer_held_rows(int layer) const;
  // Codes for block `layer`'s coded activations, made after its forward, and their values back
  // before its backward (a value recomputed meanwhile is kept); a codec's error comes back.
  std::optional<CodecFailure> encode_activations(int layer, const CodecCall& call) {
    return codes_.encode(layer, ops(), call);
  }
  std::optional<CodecFailure> decode_activations(int layer, const CodecCall& call) {
    return codes_.decode(layer, ops(), call);
  }
  bool codes_activations() const noexcept { return !codes_.empty(); }
  virtual void layer_forward(int layer) = 0;
  // Partial checkpointing frees some of a block's activations after its forward: those the family
  // lists as recomputed alone (recompute_op names the op, empty for the others), chosen by a
  // strategy (the norm and pointwise outputs: cheap; the attention kernel's saved rows: Korthikanti
  // et al. 2022's selective recomputation). recompute_missing_activations re-allocates whichever
  // are missing and marks them; the block's backward recomputes each from what is kept, right above
  // its first use, bit for bit.
  const std::string& recompute_op(int kind) const { return recompute_ops_.at(static_cast<std::size_t>(kind)); }
  // The kind of a block's activation row, or -1.
  int activation_kind(int layer, int row) const;
  void free_activation_kinds(int layer, const std::vector<int>& kinds);
  bool only_partial_activations_missing(int layer) const;
  void recompute_missing_activations(int layer);
  virtual double head_forward() = 0;            // mean cross-entropy of the micro batch
  virtual void head_backward(float dloss) = 0;  // dloss: gradient of the objective w.r.t. each position's loss
  virtual void layer_backward(int layer) = 0;
  virtual void embed_backward() = 0;
  // Where the pass is, between micro batches only: the step, the micro batch and the adapters' pass
  // (adapters draw training dropout from `pass.sequence`). Kernels are told it (KernelCall).
  void set_pass(std::int64_t step, int micro_batch, const AdapterPass& pass) noexcept {
    adapters_.set_pass(pass);
    pass_ = {-1, step, micro_batch, pass.training ? KernelPass::training : KernelPass::evaluation, pass.sequence};
  }
  // What a kernel is told of the call it serves in block `layer`: a forward call while recomputing
  // is a recompute; a backward call is the training pass's.
  KernelCall kernel_call(int layer, bool forward) const noexcept {
    KernelCall call = pass_;
    call.layer = layer;
    if (forward && recomputing_ && call.pass == KernelPass::training) call.pass = KernelPass::recompute;
    return call;
  }
  // A dropped block's forward run again before its backward: its kernels are told it recomputes.
  void recompute_layer(int layer) {
    const RecomputeScope recomputing(*this);
    layer_forward(layer);
  }
  void set_logits_mode(LogitsMode mode) { head_.set_logits_mode(mode); }
  // Sum of the per-position losses of the first `rows` sequences, after head_forward.
  double loss_sum(int rows);

  // --- decoding (strata generate; core/generate/), on a batch-1 model built for evaluation: runs
  // `tokens`, the sequence's positions first_position onward, through every block, appending
  // their keys and values to `cache`, and returns the logits (vocab, on the host) of the last one.
  // Needs the backend's rope_at and attention_decode (Ops::has).
  virtual std::vector<float> decode(std::span<const std::int32_t> tokens, std::int64_t first_position,
                                    KvCache& cache) = 0;

 protected:
  Model(Backend& backend, int batch) : store_(backend, profiler_), batch_(batch) {}
  virtual void init_base_weights(std::uint64_t seed) = 0;  // every parameter but the adapters'
  // The planned adapters' tensors, beside the family's own parameters (added first).
  void declare_adapters(const std::vector<AdapterTarget>& targets,
                        const std::function<std::string(int layer)>& block_prefix,
                        const OptimizerStateLayout& optimizer_state, Purpose purpose);
  // A block projection through the backend's matmul, then its adapters (if any).
  void adapted_matmul_forward(const ParameterRows& rows, float* out, const float* inp, const float* bias,
                              const MatmulShape& shape);
  void adapted_matmul_backward(const ParameterRows& rows, float* dinp, float* dbias, const float* dout,
                               const float* inp, const MatmulShape& shape, GradientWrite dinp_write);
  Ops& ops() noexcept { return store_.ops(); }
  // act.tokens and act.targets, the micro batch's (B, T) ids.
  void add_token_rows();
  int add_global_activation(const std::string& name, std::vector<std::int64_t> shape,
                            ElementType element = ElementType::f32);
  // Registers a block's activation rows, in kind order; `output_kind` is the block's output,
  // `recomputed_alone` the kinds the block's backward recomputes by themselves, with their ops.
  void set_layer_activation_rows(std::vector<std::vector<int>> rows, int output_kind,
                                 const std::vector<std::pair<int, std::string>>& recomputed_alone);
  // Asks the codecs for each block's saved activations (after set_layer_activation_rows).
  void declare_activation_codes(const std::vector<StrategyCodec>& codecs);
  // True once for each kind recompute_missing_activations re-allocated: the caller recomputes it.
  bool recompute(int layer, int kind);
  int activation_row(int layer, int kind) const {
    return layer_activation_rows_.at(static_cast<std::size_t>(layer)).at(static_cast<std::size_t>(kind));
  }
  int layer_output_kind() const noexcept { return output_kind_; }
  // bf16 or quantized weights: one f32 workspace row where matmuls and the head widen weight chunks
  // (at most kWeightScratchElements floats, no more than the largest matmul_scratch_floats of a
  // matrix), then the head's rows.
  void declare_weight_scratch_and_head(std::int64_t largest_matrix_scratch, const LmHeadShape& shape, LmHeadRows rows);
  Scratch weight_scratch() const {
    return Scratch{weight_scratch_row_ >= 0 ? store_.f32(weight_scratch_row_) : nullptr, weight_scratch_elements_};
  }
  const std::int32_t* tokens() const { return store_.i32(tokens_row_); }
  const std::int32_t* targets() const { return store_.i32(targets_row_); }
  // A parameter's gradient, or null when it has none (frozen, or a model built for evaluation):
  // the matmul and embedding ops skip a null weight gradient.
  float* grad_of(const ParameterRows& rows) const noexcept { return rows.grad >= 0 ? store_.f32(rows.grad) : nullptr; }
  // The norm kernels always write their gain's gradient: a frozen gain's goes to a workspace row of
  // `floats` (declared when the model trains and has frozen norms), computed and never read.
  void declare_frozen_gradient_sink(std::int64_t floats);
  float* norm_grad_of(const ParameterRows& rows) const noexcept {
    return rows.grad >= 0 ? store_.f32(rows.grad) : store_.f32(frozen_gradient_sink_row_);
  }

  // While one lives, forward ops run to recompute dropped activations (a block's backward does).
  class RecomputeScope {
   public:
    explicit RecomputeScope(Model& model) : model_(model), was_(model.recomputing_) { model.recomputing_ = true; }
    ~RecomputeScope() { model_.recomputing_ = was_; }
    RecomputeScope(const RecomputeScope&) = delete;
    RecomputeScope& operator=(const RecomputeScope&) = delete;

   private:
    Model& model_;
    bool was_;
  };

  Profiler profiler_;  // before store_, which refers to it
  TensorStore store_;
  int batch_;
  LmHead head_{store_};
  TrainablePlan trainable_;  // the family's constructor sets it first
  ModelAdapters adapters_{store_};
  ActivationCodes codes_{store_};

 private:
  int frozen_gradient_sink_row_ = -1;
  std::optional<std::string> frozen_fingerprint_;
  int tokens_row_ = -1;
  int targets_row_ = -1;
  std::vector<int> global_activation_rows_;
  std::vector<std::vector<int>> layer_activation_rows_;
  std::vector<std::vector<bool>> recompute_marks_;  // per layer and kind
  int output_kind_ = -1;
  std::vector<std::string> recompute_ops_;  // per kind: the op that recomputes it alone, or empty
  int weight_scratch_row_ = -1;
  std::int64_t weight_scratch_elements_ = 0;
  KernelCall pass_{-1, 0, 0, KernelPass::evaluation, 0};
  bool recomputing_ = false;
};

}  // namespace strata
