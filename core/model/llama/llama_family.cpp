// LLaMA as the registry knows it (core/model/model_family.hpp): Hugging Face's LlamaForCausalLM,
// its keys in [model] and config.json (grouped-query heads, the MLP's width, RoPE and Llama 3's
// scaling of it, RMSNorm's eps, a tied or untied head), no position table.
#include "core/model/llama/llama_family.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace strata {

namespace {

// As %g spells it (10000, 1e-05, 0.1), or with every digit when %g's six would read back as
// another number: two values that differ are never spelled alike.
std::string spelled(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  if (std::strtod(text, nullptr) != value) std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

// Llama 3's RoPE scaling: rope_scaling = "llama3" and its four numbers, each config.json's when
// [model] from names one (a written value must agree), else written (the factor) or defaulted.
void read_rope_scaling(ModelKeys& keys, RopeScaling& scaling) {
  ConfigView& model = keys.view();
  const HfModelConfig* hf = keys.config();
  const RopeScaling configured = hf ? hf->rope_scaling : RopeScaling{};
  const std::string configured_type = configured.factor != 0.0 ? "llama3" : "none";
  const std::string type =
      keys.agree("rope_scaling", model.get_string("rope_scaling", configured_type, {"none", "llama3"}), configured_type,
                 "rope_scaling");
  const char* numbers[] = {"rope_scaling_factor", "rope_low_freq_factor", "rope_high_freq_factor",
                           "rope_original_max_positions"};
  if (type != "llama3") {
    for (const char* key : numbers)
      if (model.has(key)) model.report_error(key, std::string(key) + " needs rope_scaling = \"llama3\"");
    return;
  }
  if (!hf && !model.has("rope_scaling_factor"))
    model.report_error("rope_scaling", "rope_scaling = \"llama3\" needs rope_scaling_factor (Llama 3.1: 8, 3.2: 32)");
  scaling.factor =
      keys.agree("rope_scaling_factor", model.get_double("rope_scaling_factor", configured.factor, 1e-6, 1e6),
                 configured.factor, "rope_scaling.factor");
  scaling.low_freq_factor = keys.agree("rope_low_freq_factor",
                                       model.get_double("rope_low_freq_factor", configured.low_freq_factor, 1e-6, 1e6),
                                       configured.low_freq_factor, "rope_scaling.low_freq_factor");
  scaling.high_freq_factor = keys.agree(
      "rope_high_freq_factor", model.get_double("rope_high_freq_factor", configured.high_freq_factor, 1e-6, 1e6),
      configured.high_freq_factor, "rope_scaling.high_freq_factor");
  scaling.original_max_positions = keys.agree(
      "rope_original_max_positions",
      static_cast<int>(model.get_int("rope_original_max_positions", configured.original_max_positions, 1, 1 << 24)),
      configured.original_max_positions, "rope_scaling.original_max_position_embeddings");
  if (!(scaling.high_freq_factor > scaling.low_freq_factor))
    model.report_error("rope_high_freq_factor", "rope_high_freq_factor must be above rope_low_freq_factor");
}

// rope_scaling with rope_type (or, in older files, type) "llama3": Llama 3.1's and 3.2's. Any other
// type is refused by name: a model that needs it would train on wrong positions.
RopeScaling llama3_rope_scaling(const HfConfigFields& fields) {
  const nlohmann::json& scaling = fields.json_object().at("rope_scaling");
  if (!scaling.is_object()) fields.refuse("rope_scaling", scaling.dump() + " is not an object");
  const nlohmann::json& type =
      scaling.contains("rope_type") ? scaling.at("rope_type") : scaling.value("type", nlohmann::json());
  if (type != "llama3")
    fields.refuse("rope_scaling", "rope_type " + type.dump() +
                                      " is not implemented (Strata implements \"llama3\", Llama 3.1's and 3.2's)");
  const HfConfigFields inner(scaling, fields.file() + ": rope_scaling");
  RopeScaling result;
  result.factor = inner.positive_number("factor", 0.0);
  if (result.factor == 0.0) inner.refuse("factor", "missing (a number above 0)");
  result.low_freq_factor = inner.positive_number("low_freq_factor", 1.0);
  result.high_freq_factor = inner.positive_number("high_freq_factor", 4.0);
  result.original_max_positions = inner.positive_int("original_max_position_embeddings", 8192);
  if (!(result.high_freq_factor > result.low_freq_factor))
    inner.refuse("high_freq_factor", "must be above low_freq_factor");
  return result;
}

}  // namespace

// LLaMA's names without q/k/v biases (those are Qwen2's).
bool LlamaFamily::recognizes(std::span<const std::string> names) const {
  return std::find(names.begin(), names.end(), "model.embed_tokens.weight") != names.end() &&
         std::none_of(names.begin(), names.end(),
                      [](const std::string& name) { return name.ends_with(".self_attn.q_proj.bias"); });
}

std::vector<std::string_view> LlamaFamily::extra_keys() const {
  return {"n_kv_head",
          "d_ff",
          "rope_theta",
          "norm_eps",
          "tie_embeddings",
          "rope_scaling",
          "rope_scaling_factor",
          "rope_low_freq_factor",
          "rope_high_freq_factor",
          "rope_original_max_positions"};
}

std::string_view LlamaFamily::hf_field(std::string_view key) const {
  if (key == "n_layer") return "num_hidden_layers";
  if (key == "n_head") return "num_attention_heads";
  if (key == "d_model") return "hidden_size";
  if (key == "vocab") return "vocab_size";
  if (key == "seq_len") return "max_position_embeddings";
  return key;
}

// RoPE has no table: seq_len is at most max_position_embeddings, by default that capped at 2048.
int LlamaFamily::default_seq_len(int max_positions) const {
  return std::min(max_positions, 2048);
}

std::string LlamaFamily::seq_len_problem(int seq_len, int max_positions, const std::string& config_file) const {
  if (seq_len <= max_positions) return {};
  return "seq_len = " + std::to_string(seq_len) + " is more than " + config_file +
         "'s max_position_embeddings = " + std::to_string(max_positions);
}

void LlamaFamily::read_keys(ModelKeys& keys, ModelShape& shape) const {
  const HfModelConfig* hf = keys.config();
  const int n_head = shape.n_head, d_model = shape.d_model;
  shape.n_kv_head = keys.integer("n_kv_head", n_head, 1, 1024, hf ? hf->n_kv_head : 0, "num_key_value_heads");
  shape.d_ff = keys.integer("d_ff", 4 * d_model, 1, 2147483647, hf ? hf->d_ff : 0, "intermediate_size");
  shape.rope_theta = keys.number("rope_theta", 10000.0, 1e-3, 1e12, hf ? hf->rope_theta : 0.0, "rope_theta");
  shape.norm_eps = keys.number("norm_eps", 1e-6, 1e-12, 1.0, hf ? hf->norm_eps : 0.0, "rms_norm_eps");
  shape.tie_embeddings =
      keys.flag("tie_embeddings", ties_by_default(), hf ? hf->tie_embeddings : false, "tie_word_embeddings");
  read_rope_scaling(keys, shape.rope_scaling);
  if (keys.shape_as_written() && keys.no_problems_yet() && n_head % shape.n_kv_head != 0)
    keys.report_error("n_kv_head", "n_kv_head = " + std::to_string(shape.n_kv_head) +
                                       " must divide n_head = " + std::to_string(n_head) +
                                       " (each key/value head serves a whole group of query heads)");
  if (keys.shape_as_written() && shape.own_head_dim == 0 && d_model % n_head == 0 && (d_model / n_head) % 2 != 0)
    keys.report_error("n_head", "d_model / n_head = " + std::to_string(d_model / n_head) +
                                    " is odd: RoPE rotates pairs of a head's dimensions, so it must be even");
}

HfModelConfig LlamaFamily::read_hf_config(const HfConfigFields& fields) const {
  HfModelConfig config;
  config.arch = std::string(arch());
  config.n_layer = fields.positive_int("num_hidden_layers");
  config.n_head = fields.positive_int("num_attention_heads");
  config.n_kv_head = fields.positive_int("num_key_value_heads", config.n_head);
  config.d_model = fields.positive_int("hidden_size");
  config.d_ff = fields.positive_int("intermediate_size");
  config.vocab = fields.positive_int("vocab_size");
  config.max_positions = fields.positive_int("max_position_embeddings");
  config.rope_theta = fields.positive_number("rope_theta", 10000.0);
  config.norm_eps = fields.positive_number("rms_norm_eps", 1e-6);
  config.tie_embeddings = fields.flag("tie_word_embeddings", ties_by_default());
  if (fields.has("rope_scaling")) config.rope_scaling = llama3_rope_scaling(fields);
  fields.require("mlp_bias", false, "Strata's LLaMA MLP has no biases");
  read_heads_and_activation(fields, config);
  require_attention_variant(fields);
  return config;
}

void LlamaFamily::read_heads_and_activation(const HfConfigFields& fields, HfModelConfig& config) const {
  fields.require("hidden_act", "silu", "Strata's LLaMA MLP is SwiGLU (silu)");
  if (config.d_model % config.n_head == 0)
    fields.require("head_dim", config.d_model / config.n_head, "a head is hidden_size / num_attention_heads wide");
}

void LlamaFamily::require_attention_variant(const HfConfigFields& fields) const {
  fields.require("attention_bias", false, "LLaMA projections have no biases here (Qwen2 has q, k and v biases)");
}

void LlamaFamily::write_attention_variant(nlohmann::ordered_json& config) const {
  config["attention_bias"] = false;
}

nlohmann::ordered_json LlamaFamily::hf_config(const ModelShape& c, int max_positions) const {
  nlohmann::ordered_json config = {{"architectures", {hf_architecture()}},
                                   {"model_type", arch()},
                                   {"num_hidden_layers", c.n_layer},
                                   {"num_attention_heads", c.n_head},
                                   {"num_key_value_heads", c.n_kv_head},
                                   {"hidden_size", c.d_model},
                                   {"head_dim", c.head_dim()},
                                   {"intermediate_size", c.d_ff},
                                   {"vocab_size", c.vocab},
                                   {"max_position_embeddings", max_positions},
                                   {"rope_theta", c.rope_theta},
                                   {"rms_norm_eps", c.norm_eps},
                                   {"hidden_act", "silu"},
                                   {"tie_word_embeddings", c.tie_embeddings},
                                   {"mlp_bias", false}};
  write_attention_variant(config);
  if (c.rope_scaling.factor > 0.0)
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", c.rope_scaling.factor},
                              {"low_freq_factor", c.rope_scaling.low_freq_factor},
                              {"high_freq_factor", c.rope_scaling.high_freq_factor},
                              {"original_max_position_embeddings", c.rope_scaling.original_max_positions}};
  return config;
}

// RoPE has no table to outgrow: an export keeps the source directory's limit.
int LlamaFamily::export_max_positions(const ModelShape& shape, std::optional<int> source_max_positions) const {
  return std::max(shape.seq_len, source_max_positions.value_or(0));
}

std::vector<ParameterTensor> LlamaFamily::parameter_tensors(const ModelShape& shape) const {
  const std::int64_t C = shape.d_model, V = shape.vocab, Q = shape.q_dim(), KV = shape.kv_dim(), F = shape.d_ff;
  std::vector<ParameterTensor> tensors = {{"model.embed_tokens.weight", {V, C}}};
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    tensors.insert(tensors.end(), {{p + "input_layernorm.weight", {C}},
                                   {p + "self_attn.q_proj.weight", {Q, C}},
                                   {p + "self_attn.k_proj.weight", {KV, C}},
                                   {p + "self_attn.v_proj.weight", {KV, C}},
                                   {p + "self_attn.o_proj.weight", {C, Q}},
                                   {p + "post_attention_layernorm.weight", {C}},
                                   {p + "mlp.gate_proj.weight", {F, C}},
                                   {p + "mlp.up_proj.weight", {F, C}},
                                   {p + "mlp.down_proj.weight", {C, F}}});
    if (shape.attention_bias)
      tensors.insert(tensors.end(), {{p + "self_attn.q_proj.bias", {Q}},
                                     {p + "self_attn.k_proj.bias", {KV}},
                                     {p + "self_attn.v_proj.bias", {KV}}});
  }
  tensors.push_back({"model.norm.weight", {C}});
  if (!shape.tie_embeddings) tensors.push_back({"lm_head.weight", {V, C}});
  return tensors;
}

std::vector<std::pair<std::string, MatmulShape>> LlamaFamily::block_matrices(const ModelShape& shape) const {
  const std::int64_t C = shape.d_model, Q = shape.q_dim(), KV = shape.kv_dim(), F = shape.d_ff;
  std::vector<std::pair<std::string, MatmulShape>> matrices = {
      {"self_attn.q_proj.weight", {0, C, Q, WeightLayout::out_in}},
      {"self_attn.k_proj.weight", {0, C, KV, WeightLayout::out_in}},
      {"mlp.gate_proj.weight", {0, C, F, WeightLayout::out_in}},
      {"mlp.down_proj.weight", {0, F, C, WeightLayout::out_in}}};
  if (Q != C) matrices.insert(matrices.begin() + 1, {"self_attn.o_proj.weight", {0, Q, C, WeightLayout::out_in}});
  return matrices;
}

std::vector<std::pair<std::string, std::string>> LlamaFamily::shape_keys(const ModelShape& x) const {
  return {
      {"model.n_layer", std::to_string(x.n_layer)},     {"model.n_head", std::to_string(x.n_head)},
      {"model.n_kv_head", std::to_string(x.n_kv_head)}, {"model.d_model", std::to_string(x.d_model)},
      {"model.d_ff", std::to_string(x.d_ff)},           {"model.vocab", std::to_string(x.vocab)},
      {"model.seq_len", std::to_string(x.seq_len)},     {"model.rope_theta", spelled(x.rope_theta)},
      {"model.norm_eps", spelled(x.norm_eps)},          {"model.tie_embeddings", x.tie_embeddings ? "true" : "false"}};
}

const ModelFamily& llama_family() {
  static const LlamaFamily family;
  return family;
}

}  // namespace strata
