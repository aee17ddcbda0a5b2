#include "core/checkpoint/hf_layout.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace strata {

using json = nlohmann::ordered_json;  // keys in the order written, as save_pretrained writes them

namespace {

void put_token_ids(json& config, const HfTokenIds& ids) {
  if (!ids.bos.is_null()) config["bos_token_id"] = ids.bos;
  if (!ids.eos.is_null()) config["eos_token_id"] = ids.eos;
  if (!ids.pad.is_null()) config["pad_token_id"] = ids.pad;
}

}  // namespace

std::string hf_config_json(const ModelSpec& model, const std::string& torch_dtype, int max_positions,
                           const HfTokenIds& ids) {
  json config = model.family().hf_config(model.shape, max_positions);
  put_token_ids(config, ids);
  config["torch_dtype"] = torch_dtype;
  config["producer"] = "strata";
  return config.dump(2) + "\n";
}

std::string hf_generation_config_json(const HfTokenIds& ids) {
  json config = {{"_from_model_config", true}};
  put_token_ids(config, ids);
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
