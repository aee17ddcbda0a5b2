// The rows every family declares, in one order, and the bf16 staging of block activations
// (core/model/transformer.hpp says how staging and recomputation work).
#include "core/model/transformer.hpp"

#include "core/model/kv_cache.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata {

Transformer::Transformer(Backend& backend, Kernel& attention, const ModelOptions& options, const AttentionShape& shape,
                         int n_layer, int d_model)
    : Model(backend, options.batch),
      attention_(attention),
      n_layer_(n_layer),
      d_model_(d_model),
      attention_shape_(shape) {
  trainable_ = options.trainable;
}

void Transformer::declare(const FamilyTensors& tensors, const ModelOptions& options) {
  const bool training = options.purpose == Purpose::training;
  rope_theta_ = static_cast<float>(tensors.rope_theta);
  rope_frequencies_ = tensors.rope_inverse_frequencies;
  const StorageTypes& storage = options.storage;
  const std::int64_t N = rows(), C = d_model_;

  // Parameters, then their gradients and optimizer state: the table's order is the print order.
  // The blocks' matrices follow the weight storage dtype, the embedding tables (and an untied head)
  // the embedding storage; vectors stay f32. Widened or dequantized matrices share one f32 scratch.
  // A frozen parameter (the strategies' plan) is added without gradient, state or master.
  if (storage.quantizer != nullptr) store_.use_weight_quantizer(*storage.quantizer, storage.quantizer_label);
  if (storage.rounding != nullptr) store_.use_bf16_rounding(*storage.rounding);
  std::int64_t largest_matrix_scratch = 0;
  bool frozen_vectors = false;
  auto add_parameter = [&](const std::string& name, int layer, const ParameterSpec& spec, bool trains) {
    const bool matrix = spec.shape.size() == 2;
    frozen_vectors = frozen_vectors || (!trains && !matrix);
    const DType dtype = !matrix ? DType::f32 : layer >= 0 ? storage.weights : storage.embedding_storage();
    const ParamKind kind = spec.kind == ParameterKind::norm        ? ParamKind::norm
                           : spec.kind == ParameterKind::embedding ? ParamKind::embedding
                           : matrix                                ? ParamKind::matrix
                                                                   : ParamKind::bias;
    const WeightLayout layout = layer >= 0 ? tensors.block_layout : WeightLayout::out_in;
    const bool decay = kind == ParamKind::matrix || kind == ParamKind::embedding;
    const StateLayout state =
        options.optimizer_state
            ? options.optimizer_state({name, layer, kind, spec.shape, layout, shape_elements(spec.shape), decay})
            : StateLayout{};
    const ParameterRows& added =
        store_.add_parameter(name, layer, spec.shape, kind, dtype, state, training && trains, layout);
    largest_matrix_scratch = std::max(largest_matrix_scratch, store_.matmul_scratch_floats(added, N));
    const int index = static_cast<int>(store_.parameters().size()) - 1;
    if (!trains) store_.set_role(index, ParameterRole::frozen);
    return index;
  };
  for (const ParameterSpec& spec : tensors.globals) {
    global_parameters_.push_back(add_parameter(spec.name, -1, spec, spec.trains));
    global_kinds_.push_back(spec.kind);
  }
  for (const ParameterSpec& spec : tensors.block) block_kinds_.push_back(spec.kind);
  block_parameters_.resize(static_cast<std::size_t>(n_layer_));
  for (int l = 0; l < n_layer_; ++l)
    for (const ParameterSpec& spec : tensors.block)
      block_parameters_[static_cast<std::size_t>(l)].push_back(add_parameter(
          tensors.block_prefix + std::to_string(l) + "." + spec.name, l, spec, trainable_.block_trains(l)));
  if (training && frozen_vectors) declare_frozen_gradient_sink(C);
  const std::string prefix = tensors.block_prefix;
  declare_adapters(
      tensors.adapter_targets, [prefix](int l) { return prefix + std::to_string(l) + "."; }, options.optimizer_state,
      options.purpose);

  // Activations of one micro batch: the global ones, the head's, then each block's.
  add_token_rows();
  for (const RowSpec& spec : tensors.global_activations)
    family_global_rows_.push_back(add_global_activation("act." + spec.name, spec.shape));
  const std::int64_t B = batch_, T = seq_len();
  LmHeadRows head_rows;
  head_rows.logits = add_global_activation("act.logits", {B, T, tensors.padded_vocab});
  head_rows.losses = add_global_activation("act.losses", {B, T});
  head_rows.logsumexp = add_global_activation("act.logsumexp", {B, T});
  head_rows.target_logits = add_global_activation("act.target_logits", {B, T});
  // A bf16 head on a backend with bf16-input matmuls: the hidden state narrowed once per pass, not
  // once per vocabulary chunk.
  if (storage.embedding_storage() == DType::bf16 && ops().supports(Op::matmul_forward_bf16_input))
    head_rows.hidden_bf16 = add_global_activation("act.hidden_bf16", {B, T, C}, ElementType::bf16);
  const ElementType stored = storage.activations == DType::bf16 ? ElementType::bf16 : ElementType::f32;
  std::vector<std::vector<int>> activation_rows(static_cast<std::size_t>(n_layer_));
  for (int l = 0; l < n_layer_; ++l)
    for (const RowSpec& spec : tensors.activations)
      activation_rows[static_cast<std::size_t>(l)].push_back(
          store_.add_row(prefix + std::to_string(l) + ".act." + spec.name, l, spec.shape, MemoryCategory::activations,
                         TensorGroup::activations, spec.stays_f32 ? ElementType::f32 : stored));
  set_layer_activation_rows(std::move(activation_rows), tensors.output, tensors.recomputed_alone);
  if (training) declare_activation_codes(storage.codecs);

  // Backward scratch: the family's rows, then the attention kernel's.
  if (training) {
    std::vector<RowSpec> workspace = tensors.workspace;
    attention_scratch_ = static_cast<int>(workspace.size());
    workspace.push_back(
        {"d_attention", {std::max<std::int64_t>(attention_.backward_scratch_floats(attention_shape_), 1)}});
    for (const RowSpec& spec : workspace)
      workspace_rows_.push_back(
          store_.add_row("ws." + spec.name, -1, spec.shape, MemoryCategory::workspace, TensorGroup::activations));
  }

  // bf16 activations: one f32 staging row per stored kind, and one for the block input.
  staging_.assign(tensors.activations.size() + 1, Staging{});
  input_kind_ = static_cast<int>(tensors.activations.size());
  if (stored == ElementType::bf16) {
    for (std::size_t a = 0; a < tensors.activations.size(); ++a)
      if (!tensors.activations[a].stays_f32)
        staging_[a].row = store_.add_row("ws.f32." + tensors.activations[a].name, -1, tensors.activations[a].shape,
                                         MemoryCategory::workspace, TensorGroup::activations);
    staging_.back().row =
        store_.add_row("ws.f32.input", -1, {B, T, C}, MemoryCategory::workspace, TensorGroup::activations);
  }
  declare_weight_scratch_and_head(largest_matrix_scratch, LmHeadShape{N, C, tensors.vocab, tensors.padded_vocab},
                                  head_rows);
  // Without a backward nothing reads the logits again: one vocabulary chunk's room is enough
  // (the same arithmetic, so the loss is the same bits).
  if (!training) head_.set_logits_mode(LogitsMode::recompute);
  // Activations are allocated per micro batch.
  if (options.allocation == Allocation::now) store_.residency().allocate_persistent();
}

void Transformer::tie_global(int alias, int target) {
  if (alias != static_cast<int>(global_parameters_.size())) throw std::logic_error("tie_global: out of order");
  global_parameters_.push_back(global_parameters_.at(static_cast<std::size_t>(target)));
  global_kinds_.push_back(global_kinds_.at(static_cast<std::size_t>(target)));
}

// --- entry points: each starts with nothing staged and leaves nothing unrounded.

void Transformer::layer_forward(int l) {
  forget_staging();
  if (trainable_.skips(l))
    identity(l);
  else
    block_forward(l);
  round_written();
}

void Transformer::layer_backward(int l) {
  if (trainable_.skips(l)) return;          // the identity passes d(output) through as d(input)
  const RecomputeScope recomputing(*this);  // the forward ops a backward runs recompute dropped kinds
  forget_staging();
  block_backward(l);
  round_written();
}

double Transformer::head_forward() {
  forget_staging();
  return head_.forward(final_norm(), head_weight_row(), targets());
}

std::vector<float> Transformer::decode(std::span<const std::int32_t> tokens, std::int64_t first_position,
                                       KvCache& cache) {
  const auto new_rows = static_cast<std::int64_t>(tokens.size());
  if (batch_ != 1 || new_rows < 1 || new_rows > seq_len() || first_position < 0 ||
      first_position + new_rows > cache.capacity())
    throw std::logic_error("decode: " + std::to_string(new_rows) + " tokens at position " +
                           std::to_string(first_position) + " do not fit a batch-1 model of " +
                           std::to_string(seq_len()) + " positions and its cache");
  for (const Op op : {Op::rope, Op::attention_decode})
    if (!ops().supports(op))
      throw std::runtime_error("backend " + std::string(ops().backend()) + " lacks the decoding op " +
                               std::string(op_name(op)));
  begin_micro_batch(tokens, {});
  decoding_ = Decoding{new_rows, first_position, &cache};
  struct Finish {  // on the way out, normal or not: activations freed, decoding over
    Transformer& model;
    ~Finish() {
      model.end_micro_batch();
      model.decoding_.reset();
    }
  } finish{*this};
  embed_forward();
  for (int l = 0; l < n_layer_; ++l) {
    allocate_layer_activations(l);
    layer_forward(l);
    if (l > 0) free_layer_activations(l - 1, false);
  }
  forget_staging();
  return head_.row_logits(final_norm() + (new_rows - 1) * d_model_, head_weight_row());
}

Weight Transformer::position_table(Weight table) const {
  if (!decoding_ || decoding_->first_position == 0) return table;
  if (table.scales != nullptr) throw std::logic_error("decode: a quantized position table");
  table.data = static_cast<const char*>(table.data) + storage_bytes(table.dtype, decoding_->first_position * d_model_);
  return table;
}

void Transformer::head_backward(float dloss) {
  forget_staging();
  final_backward(dloss);
}

// --- bf16 staging.

void Transformer::forget_staging() {
  for (Staging& staged : staging_) staged.held = Held::nothing;
}

// Rounds a written value into its bf16 row (the staging keeps the rounded values).
void Transformer::settle(int kind) {
  Staging& staged = staging(kind);
  if (staged.held != Held::written) return;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  const int stored = row(staged.layer, kind);
  ops().narrow_and_round(store_.bf16(stored), store_.f32(staged.row), elements(stored));
  staged.held = Held::value;
}

const float* Transformer::in(int l, int kind) {
  if (kind == kBlockInput && l == 0) return global_activation(0);  // the embedding output, f32
  const int stored = row(l, kind);
  Staging& staged = staging(kind);
  if (staged.row < 0) return store_.f32(stored);
  settle(kind);
  if (staged.held == Held::nothing || staged.layer != l) {
    auto timer = profiler_.scope(ProfileKind::bf16_convert);
    ops().widen(store_.f32(staged.row), store_.bf16(stored), elements(stored));
    staged.held = Held::value;
    staged.layer = l;
  }
  return store_.f32(staged.row);
}

const std::uint16_t* Transformer::bf16_input(int l, int kind, int weight) {
  if (kind == kBlockInput && l == 0) return nullptr;
  if (staging(kind).row < 0 || !ops().supports(Op::matmul_forward_bf16_input)) return nullptr;
  const ParameterRows& rows = parameter(l, weight);
  if (store_.weight(rows.param).dtype != DType::bf16 || adapted(rows)) return nullptr;
  settle(kind);
  return store_.bf16(row(l, kind));
}

float* Transformer::out(int l, int kind) {
  if (kind == kBlockInput) throw std::logic_error("a block does not write its input");
  Staging& staged = staging(kind);
  if (staged.row < 0) return store_.f32(row(l, kind));
  if (staged.layer != l) settle(kind);
  staged.held = Held::written;
  staged.layer = l;
  return store_.f32(staged.row);
}

void Transformer::round_written() {
  for (int kind = 0; kind < input_kind_; ++kind) settle(kind);
}

MatmulShape Transformer::matmul_shape(int layer, int weight) const {
  const ParameterRows& rows = parameter(layer, weight);
  const std::vector<std::int64_t>& shape = table().row(rows.param).shape;
  const bool in_out = rows.layout == WeightLayout::in_out;
  return MatmulShape{this->rows(), in_out ? shape[0] : shape[1], in_out ? shape[1] : shape[0], rows.layout};
}

}  // namespace strata
