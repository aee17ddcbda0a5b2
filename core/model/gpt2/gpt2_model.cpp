// GPT-2's tensors, names, initialisation and checkpoint conventions; its math is gpt2_block.cpp.
#include "core/model/gpt2/gpt2_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/util/random.hpp"

namespace strata {

using namespace gpt2;

namespace {

AttentionShape attention_shape_of(const GPT2Config& config, int batch) {
  if (const std::string problem = config.validate(); !problem.empty()) throw std::invalid_argument(problem);
  return {batch, config.seq_len, config.n_head, config.n_head, config.d_model / config.n_head};
}

}  // namespace

GPT2Model::GPT2Model(const GPT2Config& config, Backend& backend, Kernel& attention, const ModelOptions& options)
    : Transformer(backend, attention, options, attention_shape_of(config, options.batch), config.n_layer,
                  config.d_model),
      config_(config) {
  using K = ParameterKind;
  const std::int64_t B = options.batch, T = config.seq_len, C = config.d_model, Vp = config.padded_vocab();
  const TrainablePlan& plan = trainable_;
  FamilyTensors t;
  // wte is the tied head too: it trains while the embeddings or the head do.
  t.globals = {{"wte.weight", {Vp, C}, K::embedding, plan.embeddings || plan.head},
               {"wpe.weight", {T, C}, K::embedding, plan.embeddings},
               {"ln_f.weight", {C}, K::norm, plan.head},
               {"ln_f.bias", {C}, K::norm, plan.head}};
  t.block_prefix = "h.";
  t.block_layout = WeightLayout::in_out;  // HF's Conv1D
  t.block = {{"ln_1.weight", {C}, K::norm}, {"ln_1.bias", {C}, K::norm},       {"attn.c_attn.weight", {C, 3 * C}},
             {"attn.c_attn.bias", {3 * C}}, {"attn.c_proj.weight", {C, C}},    {"attn.c_proj.bias", {C}},
             {"ln_2.weight", {C}, K::norm}, {"ln_2.bias", {C}, K::norm},       {"mlp.c_fc.weight", {C, 4 * C}},
             {"mlp.c_fc.bias", {4 * C}},    {"mlp.c_proj.weight", {4 * C, C}}, {"mlp.c_proj.bias", {C}}};
  t.adapter_targets = gpt2_adapter_targets(config);
  t.global_activations = {{"encoded", {B, T, C}}, {"lnf", {B, T, C}}, {"lnf_mean", {B, T}}, {"lnf_rstd", {B, T}}};
  // Under bf16 storage the LayerNorm statistics stay f32 (small, and they feed every backward
  // element), as do the attention kernel's saved rows (its own format).
  const std::int64_t saved = attention.saved_floats(attention_shape());
  t.activations = {{"ln1", {B, T, C}},
                   {"ln1_mean", {B, T}, true},
                   {"ln1_rstd", {B, T}, true},
                   {"qkv", {B, T, 3 * C}},
                   {"attention_saved", {saved}, true},
                   {"atty", {B, T, C}},
                   {"residual2", {B, T, C}},
                   {"ln2", {B, T, C}},
                   {"ln2_mean", {B, T}, true},
                   {"ln2_rstd", {B, T}, true},
                   {"fch", {B, T, 4 * C}},
                   {"fch_gelu", {B, T, 4 * C}},
                   {"output", {B, T, C}}};
  t.output = A::output;
  t.recomputed_alone = {
      {A::ln1, "layernorm"}, {A::ln2, "layernorm"}, {A::fch_gelu, "gelu"}, {A::attention_saved, "attention"}};
  t.workspace = {{"d_residual", {B, T, C}}, {"d_ln", {B, T, C}},      {"d_atty", {B, T, C}},
                 {"d_qkv", {B, T, 3 * C}},  {"d_fch", {B, T, 4 * C}}, {"d_fch_gelu", {B, T, 4 * C}}};
  t.vocab = config.vocab;
  t.padded_vocab = config.padded_vocab();
  declare(t, options);
}

nlohmann::json GPT2Model::config_json() const {
  return {{"n_layer", config_.n_layer},
          {"n_head", config_.n_head},
          {"d_model", config_.d_model},
          {"vocab", config_.vocab},
          {"seq_len", config_.seq_len}};
}

// Checkpoints store exactly `vocab` rows of wte; the padded rows exist only in memory.
std::vector<std::int64_t> GPT2Model::stored_shape(const ParameterRows& rows) const {
  std::vector<std::int64_t> shape = table().row(rows.param).shape;
  if (rows.name == "wte.weight") shape[0] = config_.vocab;
  return shape;
}

// HF files may prefix every name with "transformer.".
std::vector<std::string> GPT2Model::file_names(const ParameterRows& rows) const {
  return {rows.name, "transformer." + rows.name};
}

// The tied lm_head and the causal-mask buffers older exports carry.
bool GPT2Model::ignorable_file_tensor(std::string_view name) const {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

void GPT2Model::init_base_weights(std::uint64_t seed) {
  // GPT-2: N(0, 0.02) for matrices and embeddings, residual projections scaled by 1/sqrt(2 L),
  // zero biases, unit LayerNorm gains. Padded vocab rows stay zero. Values are drawn on the host
  // and copied into each parameter's f32 value row.
  Random random(seed);
  const double residual_std = 0.02 / std::sqrt(2.0 * config_.n_layer);
  std::vector<float> values;
  for (const ParameterRows& rows : parameters()) {
    if (rows.role == ParameterRole::adapter) continue;  // the adapter initialises its own
    const TensorView view = store_.values(rows);
    values.assign(static_cast<std::size_t>(view.count), 0.0f);
    const std::string& name = rows.name;
    const bool is_gain = name.ends_with("ln_1.weight") || name.ends_with("ln_2.weight") || name == "ln_f.weight";
    const bool is_bias = name.ends_with(".bias");
    if (is_gain) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else if (!is_bias) {
      const double std_dev = name.ends_with("c_proj.weight") ? residual_std : 0.02;
      std::size_t count = values.size();
      if (name == "wte.weight")
        count = static_cast<std::size_t>(config_.vocab) * static_cast<std::size_t>(config_.d_model);
      random.fill_normal(std::span<float>(values).first(count), std_dev);
    }
    write_values(rows, values);
  }
}

}  // namespace strata
