#include "core/checkpoint/hf_directory.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <set>

#include "core/errors/manifest_error.hpp"
#include "core/model/model_family.hpp"

namespace strata {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

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
  const HfConfigFields fields(config, file);
  std::string architecture;
  if (fields.has("architectures")) {
    const json& list = config.at("architectures");
    if (!list.is_array() || list.size() != 1 || !list.at(0).is_string())
      fields.refuse("architectures", list.dump() + " is not a list of one name");
    architecture = list.at(0).get<std::string>();
  }
  const std::string model_type = fields.text("model_type", "");
  // Each family's Hugging Face architecture; its Strata arch is also its config's model_type.
  const ModelFamily* family = nullptr;
  std::string known;
  const auto families = model_families();
  for (const ModelFamily* candidate : families) {
    known += (known.empty() ? "" : ", ") + std::string(candidate->hf_architecture());
    if (candidate->hf_architecture() == architecture) family = candidate;
  }
  if (!architecture.empty()) {
    if (family == nullptr)
      fields.refuse("architectures", "\"" + architecture + "\" is not one Strata builds (" + known + ")");
    if (!model_type.empty() && model_type != family->arch())
      fields.refuse("model_type", "\"" + model_type + "\" disagrees with architectures [\"" + architecture + "\"]");
  } else if ((family = find_model_family(model_type)) == nullptr) {
    fields.refuse("architectures", "missing, and model_type \"" + model_type + "\" is not " +
                                       model_family_names(" or ") + ": say which model this is");
  }
  return family->read_hf_config(fields);
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
