#include "core/checkpoint/hf_directory.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <set>

#include "core/manifest/manifest_error.hpp"

namespace strata {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

// config.json's fields, each read with its name in any message.
class ConfigFields {
 public:
  ConfigFields(const json& config, std::string file) : config_(config), file_(std::move(file)) {}

  const json& json_object() const { return config_; }
  const std::string& file() const { return file_; }
  [[noreturn]] void refuse(const std::string& field, const std::string& why) const {
    throw ManifestError(file_ + ": " + field + ": " + why);
  }
  bool has(const std::string& field) const { return config_.contains(field) && !config_.at(field).is_null(); }
  int positive_int(const std::string& field) const {
    if (!has(field)) refuse(field, "missing (a whole number above 0)");
    const json& value = config_.at(field);
    if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > (1 << 30))
      refuse(field, value.dump() + " is not a whole number in [1, 2^30]");
    return static_cast<int>(value.get<std::int64_t>());
  }
  int positive_int(const std::string& field, int fallback) const { return has(field) ? positive_int(field) : fallback; }
  double positive_number(const std::string& field, double fallback) const {
    if (!has(field)) return fallback;
    const json& value = config_.at(field);
    if (!value.is_number() || !(value.get<double>() > 0.0)) refuse(field, value.dump() + " is not a number above 0");
    return value.get<double>();
  }
  bool flag(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!config_.at(field).is_boolean()) refuse(field, config_.at(field).dump() + " is not true or false");
    return config_.at(field).get<bool>();
  }
  std::string text(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    if (!config_.at(field).is_string()) refuse(field, config_.at(field).dump() + " is not a string");
    return config_.at(field).get<std::string>();
  }
  // A field whose only value Strata implements is `expected` (absent counts as it).
  template <typename T>
  void require(const std::string& field, const T& expected, const std::string& why) const {
    if (!has(field)) return;
    const json& value = config_.at(field);
    if (value != json(expected)) refuse(field, value.dump() + " is not implemented: " + why);
  }

 private:
  const json& config_;
  std::string file_;
};

HfModelConfig gpt2_config(const ConfigFields& fields) {
  HfModelConfig config;
  config.arch = "gpt2";
  config.n_layer = fields.positive_int("n_layer");
  config.n_head = fields.positive_int("n_head");
  config.d_model = fields.positive_int("n_embd");
  config.vocab = fields.positive_int("vocab_size");
  config.max_positions = fields.positive_int("n_positions");
  config.d_ff = 4 * config.d_model;
  config.norm_eps = fields.positive_number("layer_norm_epsilon", 1e-5);
  config.tie_embeddings = true;
  fields.require("n_inner", 4 * config.d_model, "Strata's GPT-2 MLP is 4 x n_embd wide");
  fields.require("activation_function", "gelu_new", "Strata's GPT-2 uses the tanh GELU (gelu_new)");
  fields.require("layer_norm_epsilon", 1e-5, "Strata's GPT-2 layer norm uses eps 1e-5");
  fields.require("tie_word_embeddings", true, "Strata's GPT-2 head reads the token embeddings");
  fields.require("add_cross_attention", false, "GPT-2 with cross-attention is an encoder-decoder");
  fields.require("scale_attn_by_inverse_layer_idx", false, "attention scores are scaled by 1/sqrt(head_dim) only");
  fields.require("reorder_and_upcast_attn", false, "not a GPT-2 variant Strata builds");
  fields.require("scale_attn_weights", true, "attention scores are scaled by 1/sqrt(head_dim)");
  return config;
}

// rope_scaling with rope_type (or, in older files, type) "llama3": Llama 3.1's and 3.2's. Any other
// type is refused by name: a model that needs it would train on wrong positions.
RopeScaling llama3_rope_scaling(const ConfigFields& fields) {
  const json& scaling = fields.json_object().at("rope_scaling");
  if (!scaling.is_object()) fields.refuse("rope_scaling", scaling.dump() + " is not an object");
  const json& type = scaling.contains("rope_type") ? scaling.at("rope_type") : scaling.value("type", json());
  if (type != "llama3")
    fields.refuse("rope_scaling", "rope_type " + type.dump() +
                                      " is not implemented (Strata implements \"llama3\", Llama 3.1's and 3.2's)");
  const ConfigFields inner(scaling, fields.file() + ": rope_scaling");
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

HfModelConfig llama_config(const ConfigFields& fields, const std::string& arch) {
  HfModelConfig config;
  config.arch = arch;
  config.n_layer = fields.positive_int("num_hidden_layers");
  config.n_head = fields.positive_int("num_attention_heads");
  config.n_kv_head = fields.positive_int("num_key_value_heads", config.n_head);
  config.d_model = fields.positive_int("hidden_size");
  config.d_ff = fields.positive_int("intermediate_size");
  config.vocab = fields.positive_int("vocab_size");
  config.max_positions = fields.positive_int("max_position_embeddings");
  config.rope_theta = fields.positive_number("rope_theta", 10000.0);
  config.norm_eps = fields.positive_number("rms_norm_eps", 1e-6);
  config.tie_embeddings = fields.flag("tie_word_embeddings", false);
  if (fields.has("rope_scaling")) config.rope_scaling = llama3_rope_scaling(fields);
  fields.require("hidden_act", "silu", "Strata's LLaMA MLP is SwiGLU (silu)");
  fields.require("mlp_bias", false, "Strata's LLaMA MLP has no biases");
  if (config.d_model % config.n_head == 0)
    fields.require("head_dim", config.d_model / config.n_head, "a head is hidden_size / num_attention_heads wide");
  if (arch == "llama")
    fields.require("attention_bias", false, "LLaMA projections have no biases here (Qwen2 has q, k and v biases)");
  else
    fields.require("use_sliding_window", false, "Strata's attention is full causal attention");
  return config;
}

}  // namespace

std::map<std::string, std::string> parse_hf_index(std::string_view text, const std::string& file) {
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    throw CheckpointError(file + ": is not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index.at("weight_map").is_object())
    throw CheckpointError(file + ": has no \"weight_map\" object (tensor name -> shard file)");
  std::map<std::string, std::string> listed;
  for (const auto& [tensor, shard] : index.at("weight_map").items()) {
    if (!shard.is_string()) throw CheckpointError(file + ": weight_map[\"" + tensor + "\"] is not a file name");
    const std::string name = shard.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw CheckpointError(file + ": weight_map[\"" + tensor + "\"] = \"" + name +
                            "\" is not a file name inside the directory");
    listed[tensor] = name;
  }
  return listed;
}

bool is_hf_directory(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error) && fs::is_regular_file(path / kConfig, error);
}

HfModelConfig read_hf_config(const fs::path& directory) {
  const fs::path path = directory / kConfig;
  std::error_code error;
  if (!fs::is_directory(directory, error))
    throw ManifestError(directory.string() + ": not a directory (a Hugging Face model directory holds config.json)");
  if (!fs::is_regular_file(path, error))
    throw ManifestError(directory.string() + ": holds no config.json (is it a Hugging Face model directory?)");
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw ManifestError(path.string() + ": cannot be read");
  return parse_hf_config(text, path.string());
}

HfModelConfig parse_hf_config(std::string_view text, const std::string& file) {
  json config;
  try {
    config = json::parse(text);
  } catch (const json::exception& e) {
    throw ManifestError(file + ": is not valid JSON: " + e.what());
  }
  if (!config.is_object()) throw ManifestError(file + ": is not a JSON object");
  const ConfigFields fields(config, file);
  std::string architecture;
  if (fields.has("architectures")) {
    const json& list = config.at("architectures");
    if (!list.is_array() || list.size() != 1 || !list.at(0).is_string())
      fields.refuse("architectures", list.dump() + " is not a list of one name");
    architecture = list.at(0).get<std::string>();
  }
  const std::string model_type = fields.text("model_type", "");
  // Each architecture's Strata arch, which is also its config's model_type.
  const std::map<std::string, std::string> known = {
      {"GPT2LMHeadModel", "gpt2"}, {"LlamaForCausalLM", "llama"}, {"Qwen2ForCausalLM", "qwen2"}};
  std::string arch;
  if (!architecture.empty()) {
    const auto found = known.find(architecture);
    if (found == known.end())
      fields.refuse("architectures", "\"" + architecture +
                                         "\" is not one Strata builds (GPT2LMHeadModel, LlamaForCausalLM, "
                                         "Qwen2ForCausalLM)");
    arch = found->second;
    if (!model_type.empty() && model_type != arch)
      fields.refuse("model_type", "\"" + model_type + "\" disagrees with architectures [\"" + architecture + "\"]");
  } else if (model_type == "gpt2" || model_type == "llama" || model_type == "qwen2") {
    arch = model_type;
  } else {
    fields.refuse("architectures", "missing, and model_type \"" + model_type +
                                       "\" is not gpt2, llama or qwen2: say which model this is");
  }
  return arch == "gpt2" ? gpt2_config(fields) : llama_config(fields, arch);
}

HfWeights open_hf_weights(const fs::path& directory) {
  HfWeights weights;
  std::error_code error;
  const fs::path index_path = directory / kIndex;
  std::vector<fs::path> shards;
  std::map<std::string, std::string> listed;  // tensor -> shard file name, from the index
  if (fs::is_regular_file(index_path, error)) {
    std::ifstream in(index_path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) throw CheckpointError(index_path.string() + ": cannot be read");
    listed = parse_hf_index(text, index_path.string());
    std::set<std::string> names;
    for (const auto& [tensor, shard] : listed) names.insert(shard);
    for (const std::string& name : names) shards.push_back(directory / name);
  } else if (fs::is_regular_file(directory / kSingleFile, error)) {
    shards.push_back(directory / kSingleFile);
  } else {
    throw CheckpointError(directory.string() + ": holds neither " + kSingleFile + " nor " + kIndex);
  }
  for (const fs::path& shard : shards) {
    if (!fs::is_regular_file(shard, error))
      throw CheckpointError(shard.string() + ": a shard " + (listed.empty() ? "" : std::string(kIndex) + " names ") +
                            "is missing");
    weights.files.push_back(std::make_shared<const SafetensorsFile>(
        SafetensorsFile::map(shard, nullptr, SafetensorsFile::Paging::on_demand)));
    const SafetensorsFile& file = *weights.files.back();
    for (const auto& [name, entry] : file.entries()) {
      if (const auto [at, inserted] = weights.tensors.emplace(name, &file); !inserted)
        throw CheckpointError(shard.string() + ": tensor '" + name + "' is also in " + at->second->path().string());
    }
  }
  for (const auto& [tensor, shard] : listed) {
    const auto found = weights.tensors.find(tensor);
    if (found == weights.tensors.end() || found->second->path().filename() != shard)
      throw CheckpointError(index_path.string() + ": names tensor '" + tensor + "' in " + shard +
                            ", which does not hold it");
  }
  return weights;
}

}  // namespace strata
