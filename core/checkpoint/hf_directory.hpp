#pragma once
// A Hugging Face model directory, as the hub ships one: config.json (the architecture and its
// shape), and the weights in model.safetensors or in shards named by model.safetensors.index.json.
// Each family reads its own architecture's config.json (core/model/<family>/, ModelFamily::
// read_hf_config): a config field Strata does not implement (a rope_scaling other than Llama 3's,
// biases a LLaMA does not have, another activation) is refused by name rather than ignored.
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint/safetensors.hpp"
#include "core/model/hf_model_config.hpp"

namespace strata {

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
