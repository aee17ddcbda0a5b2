// LLaMA's tensors, names, initialisation and checkpoint conventions; its math is llama_block.cpp.
#include "core/model/llama/llama_model.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "core/util/random.hpp"

namespace strata {

using namespace llama;

namespace {

AttentionShape attention_shape_of(const LlamaConfig& config, int batch) {
  if (const std::string problem = validate_llama(config); !problem.empty()) throw std::invalid_argument(problem);
  return {batch, config.seq_len, config.n_head, config.n_kv_head, config.head_dim(), config.sliding_window};
}

}  // namespace

LlamaModel::LlamaModel(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options,
                       const LlamaMath& math)
    : Transformer(backend, attention, options, attention_shape_of(config, options.batch), config.n_layer,
                  config.d_model),
      config_(config),
      math_(math) {
  using K = ParameterKind;
  const std::int64_t B = options.batch, T = config.seq_len, C = config.d_model, Q = config.q_dim();
  const std::int64_t KV = config.kv_dim(), F = config.d_ff, Vp = config.padded_vocab();
  const TrainablePlan& plan = trainable_;
  FamilyTensors t;
  // A tied embedding is the head too: it trains while the embeddings or the head do.
  t.globals = {
      {"model.embed_tokens.weight", {Vp, C}, K::embedding, plan.embeddings || (config.tie_embeddings && plan.head)},
      {"model.norm.weight", {C}, K::norm, plan.head}};
  if (!config.tie_embeddings) t.globals.push_back({"lm_head.weight", {Vp, C}, K::weight, plan.head});
  t.block_prefix = "model.layers.";
  t.block_layout = WeightLayout::out_in;  // every matrix is nn.Linear
  t.block = {{"input_layernorm.weight", {C}, K::norm}, {"self_attn.q_proj.weight", {Q, C}},
             {"self_attn.k_proj.weight", {KV, C}},     {"self_attn.v_proj.weight", {KV, C}},
             {"self_attn.o_proj.weight", {C, Q}},      {"post_attention_layernorm.weight", {C}, K::norm},
             {"mlp.gate_proj.weight", {F, C}},         {"mlp.up_proj.weight", {F, C}},
             {"mlp.down_proj.weight", {C, F}}};
  if (config.attention_bias)
    t.block.insert(t.block.end(),
                   {{"self_attn.q_proj.bias", {Q}}, {"self_attn.k_proj.bias", {KV}}, {"self_attn.v_proj.bias", {KV}}});
  t.adapter_targets = llama_adapter_targets(config);
  t.global_activations = {{"encoded", {B, T, C}}, {"final_norm", {B, T, C}}, {"final_rstd", {B, T}}};
  // Under bf16 storage the RMSNorm statistics and the attention kernel's saved rows stay f32.
  const std::string gated = math.gelu_mlp ? "geglu" : "swiglu";  // the MLP product's row and op
  t.activations = {{"norm1", {B, T, C}}, {"norm1_rstd", {B, T}, true},
                   {"q", {B, T, Q}},     {"k", {B, T, KV}},
                   {"v", {B, T, KV}},    {"attention_saved", {attention.saved_floats(attention_shape())}, true},
                   {"atty", {B, T, Q}},  {"residual2", {B, T, C}},
                   {"norm2", {B, T, C}}, {"norm2_rstd", {B, T}, true},
                   {"gate", {B, T, F}},  {"up", {B, T, F}},
                   {gated, {B, T, F}},   {"output", {B, T, C}}};
  t.output = A::output;
  t.recomputed_alone = {
      {A::norm1, "rmsnorm"}, {A::norm2, "rmsnorm"}, {A::swiglu, gated}, {A::attention_saved, "attention"}};
  t.workspace = {{"d_residual", {B, T, C}}, {"d_norm", {B, T, C}}, {"d_atty", {B, T, Q}},
                 {"d_q", {B, T, Q}},        {"d_k", {B, T, KV}},   {"d_v", {B, T, KV}},
                 {"d_gate", {B, T, F}},     {"d_up", {B, T, F}},   {"d_" + gated, {B, T, F}}};
  t.rope_theta = config.rope_theta;
  t.rope_inverse_frequencies = rope_inverse_frequencies(config);
  t.vocab = config.vocab;
  t.padded_vocab = config.padded_vocab();
  declare(t, options);
  if (config.tie_embeddings) tie_global(G::lm_head, G::embed);
}

nlohmann::json LlamaModel::config_json() const {
  nlohmann::json json = {{"arch", arch()},
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
  if (config_.attention_bias) json["attention_bias"] = true;
  if (config_.sliding_window > 0) json["sliding_window"] = config_.sliding_window;  // a resume must keep it
  if (config_.own_head_dim > 0) json["head_dim"] = config_.own_head_dim;
  if (config_.rope_scaling.factor != 0.0)
    json["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", config_.rope_scaling.factor},
                            {"low_freq_factor", config_.rope_scaling.low_freq_factor},
                            {"high_freq_factor", config_.rope_scaling.high_freq_factor},
                            {"original_max_position_embeddings", config_.rope_scaling.original_max_positions}};
  return json;
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
  // gains (w = 1 - offset: Gemma's zeros), zero biases. Padded vocabulary rows stay zero. Drawn on
  // the host, copied into each f32 value row.
  Random random(seed);
  std::vector<float> values;
  for (const ParameterRows& rows : parameters()) {
    if (rows.role == ParameterRole::adapter) continue;  // the adapter initialises its own
    const TensorView view = store_.values(rows);
    values.assign(static_cast<std::size_t>(view.count), 0.0f);
    if (rows.name.ends_with(".bias")) {
      // zero
    } else if (table().row(rows.param).shape.size() == 1) {
      std::fill(values.begin(), values.end(), 1.0f - math_.norm_weight_offset);
    } else {
      std::size_t count = values.size();
      if (rows.name == "model.embed_tokens.weight" || rows.name == "lm_head.weight")
        count = static_cast<std::size_t>(config_.vocab) * static_cast<std::size_t>(config_.d_model);
      random.fill_normal(std::span<float>(values).first(count), 0.02);
    }
    write_values(rows, values);
  }
}

}  // namespace strata
