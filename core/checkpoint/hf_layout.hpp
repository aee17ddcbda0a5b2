#pragma once
// What `strata export --hf` writes, as Hugging Face's `transformers` reads a model directory
// (PretrainedConfig's config.json, and the sharded-checkpoint layout of save_pretrained):
//   config.json                          architectures, model_type and the family's shape keys
//   generation_config.json               the special tokens' ids generation starts and stops with
//   model.safetensors                    every tensor, when they fit in one shard; else
//   model-00001-of-0000N.safetensors ... shards in tensor order, each at most the shard size
//   model.safetensors.index.json         {"metadata": {"total_size": bytes of tensor data},
//                                         "weight_map": {tensor: shard file}}
// core/checkpoint/hf_directory.hpp reads the same layout back.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/model_spec.hpp"

namespace strata {

// The special tokens' ids an export names, as JSON values as a config.json writes them (eos may be
// a list, as Llama 3.1's is); null where unknown.
struct HfTokenIds {
  nlohmann::ordered_json bos, eos, pad;
};

// config.json for `model` (its [model] keys in the family's names). torch_dtype is "float32" or
// "bfloat16"; max_positions is at least the model's seq_len.
std::string hf_config_json(const ModelSpec& model, const std::string& torch_dtype, int max_positions,
                           const HfTokenIds& ids);
// generation_config.json as transformers writes a model's defaults: its bos, eos and pad ids.
std::string hf_generation_config_json(const HfTokenIds& ids);

// Which shard each tensor goes to, in order: a new shard starts when the next tensor would take
// the current one past `shard_bytes` (a tensor larger than that gets a shard of its own).
std::vector<int> plan_shards(const std::vector<std::uint64_t>& tensor_bytes, std::uint64_t shard_bytes);

// "model-00002-of-00005.safetensors" for shard 1 of 5; "model.safetensors" for one shard.
std::string shard_file_name(int shard, int shards);

// model.safetensors.index.json's text.
std::string hf_index_json(std::uint64_t total_size, const std::map<std::string, std::string>& weight_map);

}  // namespace strata
