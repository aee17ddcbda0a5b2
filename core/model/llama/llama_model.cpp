// LLaMA's rows, names, initialisation and checkpoint conventions; the block's math is in
// llama_block.cpp and the embedding and head in llama_head.cpp.
#include "core/model/llama/llama_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "core/util/random.hpp"

namespace strata {

namespace {

constexpr std::size_t idx(auto value) {
  return static_cast<std::size_t>(value);
}

// Kept as f32 under bf16 activation storage: the RMSNorm statistics and the attention kernel's
// saved rows.
bool stays_f32(LlamaActivation activation) {
  return activation == LlamaActivation::norm1_rstd || activation == LlamaActivation::norm2_rstd ||
         activation == LlamaActivation::attention_saved;
}

std::string_view activation_name(LlamaActivation activation) {
  static constexpr std::array<std::string_view, kLlamaActivationCount> names = {
      "norm1",     "norm1_rstd", "q",          "k",    "v",  "attention_saved", "atty",
      "residual2", "norm2",      "norm2_rstd", "gate", "up", "swiglu",          "output"};
  return names[idx(activation)];
}

}  // namespace

std::string_view llama_param_name(LlamaParam param) noexcept {
  switch (param) {
    case LlamaParam::input_norm: return "input_layernorm.weight";
    case LlamaParam::q_proj: return "self_attn.q_proj.weight";
    case LlamaParam::k_proj: return "self_attn.k_proj.weight";
    case LlamaParam::v_proj: return "self_attn.v_proj.weight";
    case LlamaParam::o_proj: return "self_attn.o_proj.weight";
    case LlamaParam::post_attention_norm: return "post_attention_layernorm.weight";
    case LlamaParam::gate_proj: return "mlp.gate_proj.weight";
    case LlamaParam::up_proj: return "mlp.up_proj.weight";
    case LlamaParam::down_proj: return "mlp.down_proj.weight";
    case LlamaParam::count: break;
  }
  return "?";
}

LlamaModel::LlamaModel(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options)
    : Model(backend, options.batch), config_(config), attention_(attention) {
  trainable_ = options.trainable;
  if (const std::string problem = config.validate(); !problem.empty()) throw std::invalid_argument(problem);
  const bool training = options.purpose == Purpose::training;
  const StorageTypes storage = options.storage;
  const std::int64_t B = options.batch, T = config.seq_len, C = config.d_model, L = config.n_layer;
  const std::int64_t KV = config.kv_dim(), F = config.d_ff, Vp = config.padded_vocab();
  attention_shape_ = AttentionShape{options.batch, config.seq_len, config.n_head, config.n_kv_head, config.head_dim()};

  // The blocks' matrices follow the weight storage dtype, the embeddings and an untied head the
  // embedding storage; the norm gains stay f32. Widened or dequantized matrices share one scratch.
  if (storage.quantizer != nullptr) store_.use_weight_quantizer(*storage.quantizer);
  std::int64_t largest_matrix_scratch = 0;
  // A frozen parameter (the strategies' plan) is added without gradient, state or master.
  bool frozen_norms = false;
  auto add_parameter = [&](const std::string& name, int layer, std::vector<std::int64_t> shape, bool trains) {
    const bool matrix = shape.size() == 2;
    frozen_norms = frozen_norms || (!trains && !matrix);
    const DType dtype = !matrix ? DType::f32 : layer >= 0 ? storage.weights : storage.embedding_storage();
    const StateLayout state = options.optimizer_state ? options.optimizer_state(shape_elements(shape)) : StateLayout{};
    // Every LLaMA matrix is nn.Linear, (out, in).
    const ParameterRows& added = store_.add_parameter(name, layer, std::move(shape), matrix, dtype, state,
                                                      training && trains, WeightLayout::out_in);
    largest_matrix_scratch = std::max(largest_matrix_scratch, store_.matmul_scratch_floats(added, B * T));
    const int index = static_cast<int>(store_.parameters().size()) - 1;
    if (!trains) store_.set_role(index, ParameterRole::frozen);
    return index;
  };
  // A tied embedding is the head too: it trains while the embeddings or the head do.
  const bool embedding_trains = trainable_.embeddings || (config.tie_embeddings && trainable_.head);
  embed_ = add_parameter("model.embed_tokens.weight", -1, {Vp, C}, embedding_trains);
  norm_ = add_parameter("model.norm.weight", -1, {C}, trainable_.head);
  lm_head_ = config.tie_embeddings ? embed_ : add_parameter("lm_head.weight", -1, {Vp, C}, trainable_.head);
  const std::array<std::vector<std::int64_t>, kLlamaParamCount> shapes = {
      std::vector<std::int64_t>{C}, {C, C}, {KV, C}, {KV, C}, {C, C}, {C}, {F, C}, {F, C}, {C, F}};
  layer_parameters_.resize(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    for (std::size_t p = 0; p < kLlamaParamCount; ++p)
      layer_parameters_[static_cast<std::size_t>(l)][p] = add_parameter(
          "model.layers." + std::to_string(l) + "." + std::string(llama_param_name(static_cast<LlamaParam>(p))), l,
          shapes[p], trainable_.block_trains(l));
  if (training && frozen_norms) declare_frozen_gradient_sink(C);
  declare_adapters(
      llama_adapter_targets(config), [](int l) { return "model.layers." + std::to_string(l) + "."; },
      options.optimizer_state, options.purpose);

  // Activations of one micro batch.
  add_token_rows();
  encoded_row_ = add_global_activation("act.encoded", {B, T, C});
  final_norm_row_ = add_global_activation("act.final_norm", {B, T, C});
  final_rstd_row_ = add_global_activation("act.final_rstd", {B, T});
  LmHeadRows head_rows;
  head_rows.logits = add_global_activation("act.logits", {B, T, Vp});
  head_rows.losses = add_global_activation("act.losses", {B, T});
  head_rows.logsumexp = add_global_activation("act.logsumexp", {B, T});
  head_rows.target_logits = add_global_activation("act.target_logits", {B, T});

  const std::int64_t attention_saved = attention.saved_floats(attention_shape_);
  const std::array<std::vector<std::int64_t>, kLlamaActivationCount> activation_shapes = {
      std::vector<std::int64_t>{B, T, C},
      {B, T},
      {B, T, C},
      {B, T, KV},
      {B, T, KV},
      {attention_saved},
      {B, T, C},
      {B, T, C},
      {B, T, C},
      {B, T},
      {B, T, F},
      {B, T, F},
      {B, T, F},
      {B, T, C}};
  const ElementType stored = storage.activations == DType::bf16 ? ElementType::bf16 : ElementType::f32;
  std::vector<std::vector<int>> activation_rows(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l)
    for (std::size_t a = 0; a < kLlamaActivationCount; ++a) {
      const auto which = static_cast<LlamaActivation>(a);
      activation_rows[static_cast<std::size_t>(l)].push_back(store_.add_row(
          "model.layers." + std::to_string(l) + ".act." + std::string(activation_name(which)), l, activation_shapes[a],
          MemoryCategory::activations, TensorGroup::activations, stays_f32(which) ? ElementType::f32 : stored));
    }
  set_layer_activation_rows(std::move(activation_rows), static_cast<int>(LA::output));

  // Backward scratch.
  workspace_rows_.fill(-1);
  if (training) {
    const std::int64_t attention_scratch =
        std::max<std::int64_t>(attention.backward_scratch_floats(attention_shape_), 1);
    const std::array<std::pair<std::string_view, std::vector<std::int64_t>>, kLlamaWorkspaceCount> workspace = {{
        {"d_residual", {B, T, C}},
        {"d_norm", {B, T, C}},
        {"d_atty", {B, T, C}},
        {"d_q", {B, T, C}},
        {"d_k", {B, T, KV}},
        {"d_v", {B, T, KV}},
        {"d_gate", {B, T, F}},
        {"d_up", {B, T, F}},
        {"d_swiglu", {B, T, F}},
        {"d_attention", {attention_scratch}},
    }};
    for (std::size_t w = 0; w < kLlamaWorkspaceCount; ++w)
      workspace_rows_[w] = store_.add_row("ws." + std::string(workspace[w].first), -1, workspace[w].second,
                                          MemoryCategory::workspace, TensorGroup::activations);
  }
  if (storage.activations == DType::bf16) {
    // One f32 staging row per stored kind (and one for the block input): simpler than GPT-2's
    // lifetime sharing, at the price of one block's f32 activations of workspace.
    for (std::size_t a = 0; a < kLlamaActivationCount; ++a) {
      const auto which = static_cast<LlamaActivation>(a);
      if (stays_f32(which)) continue;
      const int row = store_.add_row("ws.f32." + std::string(activation_name(which)), -1, activation_shapes[a],
                                     MemoryCategory::workspace, TensorGroup::activations);
      staging_.assign(static_cast<int>(a), row);
    }
    input_staging_row_ =
        store_.add_row("ws.f32.input", -1, {B, T, C}, MemoryCategory::workspace, TensorGroup::activations);
  }
  declare_weight_scratch_and_head(largest_matrix_scratch, LmHeadShape{B * T, C, config.vocab, Vp}, head_rows);
  if (options.allocation == Allocation::now) store_.allocate_persistent();
}

nlohmann::json LlamaModel::config_json() const {
  return {{"arch", "llama"},
          {"n_layer", config_.n_layer},
          {"n_head", config_.n_head},
          {"n_kv_head", config_.n_kv_head},
          {"d_model", config_.d_model},
          {"d_ff", config_.d_ff},
          {"vocab", config_.vocab},
          {"seq_len", config_.seq_len},
          {"rope_theta", config_.rope_theta},
          {"norm_eps", config_.norm_eps},
          {"tie_embeddings", config_.tie_embeddings}};
}

// Checkpoints store exactly `vocab` rows of the embedding and the head.
std::vector<std::int64_t> LlamaModel::stored_shape(const ParameterRows& rows) const {
  std::vector<std::int64_t> shape = table().row(rows.param).shape;
  if (rows.name == "model.embed_tokens.weight" || rows.name == "lm_head.weight") shape[0] = config_.vocab;
  return shape;
}

// A tied file may still carry lm_head.weight; older exports carry RoPE's inverse frequencies.
bool LlamaModel::ignorable_file_tensor(std::string_view name) const {
  return (config_.tie_embeddings && name == "lm_head.weight") || name.ends_with("rotary_emb.inv_freq");
}

void LlamaModel::init_base_weights(std::uint64_t seed) {
  // Hugging Face's LLaMA initialisation: N(0, 0.02) for every matrix and the embedding, unit RMSNorm
  // gains. Padded vocabulary rows stay zero. Drawn on the host, copied into each f32 value row.
  Random random(seed);
  std::vector<float> values;
  for (const ParameterRows& rows : parameters()) {
    if (rows.role == ParameterRole::adapter) continue;  // the adapter initialises its own
    const TensorView view = store_.values(rows);
    values.assign(static_cast<std::size_t>(view.count), 0.0f);
    if (table().row(rows.param).shape.size() == 1) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else {
      std::size_t count = values.size();
      if (rows.name == "model.embed_tokens.weight" || rows.name == "lm_head.weight")
        count = static_cast<std::size_t>(config_.vocab) * static_cast<std::size_t>(config_.d_model);
      for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(random.normal() * 0.02);
    }
    write_values(rows, values);
  }
}

int LlamaModel::head_weight_row() const {
  return parameters()[static_cast<std::size_t>(lm_head_)].param;
}

}  // namespace strata
