#pragma once
// A Hugging Face model directory, as the hub ships one: config.json (the architecture and its
// shape), and the weights in model.safetensors or in shards named by model.safetensors.index.json.
// Three architectures are read: GPT2LMHeadModel (arch "gpt2"), LlamaForCausalLM ("llama") and
// Qwen2ForCausalLM ("qwen2"). A config field Strata does not implement (a rope_scaling other than
// Llama 3's, biases a
// LLaMA does not have, another activation) is refused by name rather than ignored.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint/safetensors.hpp"
#include "core/model/llama/llama_config.hpp"

namespace strata {

// config.json in Strata's [model] terms. max_positions is n_positions (GPT-2) or
// max_position_embeddings (LLaMA, Qwen2).
struct HfModelConfig {
  std::string arch;
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int d_model = 0;
  int d_ff = 0;
  int vocab = 0;
  int max_positions = 0;
  double rope_theta = 0.0;
  RopeScaling rope_scaling = {};  // rope_scaling of rope_type "llama3"; factor 0 without one
  double norm_eps = 0.0;
  bool tie_embeddings = false;
};

// Throws ManifestError naming DIR/config.json and the field.
HfModelConfig read_hf_config(const std::filesystem::path& directory);
// The same from config.json's text; `file` names it in messages (the fuzz target's entry point).
HfModelConfig parse_hf_config(std::string_view text, const std::string& file);

// model.safetensors.index.json's weight_map: tensor -> shard file name (a name inside the
// directory). Throws CheckpointError naming `file`.
std::map<std::string, std::string> parse_hf_index(std::string_view text, const std::string& file);

// The directory's weights: every file mapped, paged in on demand (no copy of its bytes; a reader
// releases each tensor's pages once it has it: SafetensorsFile::release), and which file holds each
// tensor. The files must not change while they are held: a file cut short under its mapping faults. With an index,
// every shard it names must exist and hold the tensors it lists; a tensor in two files is refused. Throws
// CheckpointError naming the file.
struct HfWeights {
  std::vector<std::shared_ptr<const SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> tensors;
};
HfWeights open_hf_weights(const std::filesystem::path& directory);

// Whether `path` is a Hugging Face model directory (it holds config.json).
bool is_hf_directory(const std::filesystem::path& path);

}  // namespace strata
