#include "core/checkpoint/hf_layout.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace strata {

using json = nlohmann::ordered_json;  // keys in the order written, as save_pretrained writes them

namespace {

json gpt2_config(const GPT2Config& c, int max_positions) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.d_model},
          {"n_inner", 4 * c.d_model},
          {"vocab_size", c.vocab},
          {"n_positions", max_positions},
          {"n_ctx", max_positions},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"tie_word_embeddings", true},
          {"scale_attn_weights", true}};
}

json llama_config(const std::string& arch, const LlamaConfig& c, int max_positions) {
  json config = {{"architectures", {arch == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
                 {"model_type", arch},
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
  if (arch == "llama")
    config["attention_bias"] = false;
  else
    config["use_sliding_window"] = false;
  if (c.rope_scaling.factor > 0.0)
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", c.rope_scaling.factor},
                              {"low_freq_factor", c.rope_scaling.low_freq_factor},
                              {"high_freq_factor", c.rope_scaling.high_freq_factor},
                              {"original_max_position_embeddings", c.rope_scaling.original_max_positions}};
  return config;
}

}  // namespace

std::string hf_config_json(const ModelSpec& model, const std::string& torch_dtype, int max_positions,
                           std::optional<std::uint32_t> bos, std::optional<std::uint32_t> eos) {
  json config =
      model.is_llama() ? llama_config(model.arch, model.llama, max_positions) : gpt2_config(model.gpt2, max_positions);
  if (bos) config["bos_token_id"] = *bos;
  if (eos) config["eos_token_id"] = *eos;
  config["torch_dtype"] = torch_dtype;
  config["producer"] = "strata";
  return config.dump(2) + "\n";
}

std::vector<int> plan_shards(const std::vector<std::uint64_t>& tensor_bytes, std::uint64_t shard_bytes) {
  std::vector<int> shard_of;
  shard_of.reserve(tensor_bytes.size());
  int shard = 0;
  std::uint64_t filled = 0;
  for (const std::uint64_t bytes : tensor_bytes) {
    if (filled > 0 && filled + bytes > shard_bytes) {
      ++shard;
      filled = 0;
    }
    filled += bytes;
    shard_of.push_back(shard);
  }
  return shard_of;
}

std::string shard_file_name(int shard, int shards) {
  if (shards == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, shards);
  return name;
}

std::string hf_index_json(std::uint64_t total_size, const std::map<std::string, std::string>& weight_map) {
  json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", json::object()}};
  for (const auto& [tensor, file] : weight_map) index["weight_map"][tensor] = file;
  return index.dump(2) + "\n";
}

}  // namespace strata
