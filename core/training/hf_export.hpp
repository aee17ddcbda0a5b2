#pragma once
// `strata export --hf OUT_DIR`: a trained run as a Hugging Face model directory
// (core/checkpoint/hf_layout.hpp): config.json, the weights in the family's names with every
// adapter folded into its matrix (as --merge folds them), sharded with their index, in f32 or
// bf16, and the tokenizer's files when the manifest names a tokenizer. `[model] from = OUT_DIR`
// reads it back; in f32 the weights come back bit for bit.
//
// OUT_DIR is made whole or not at all: everything is written into a new directory beside it (a
// name no other export uses), each file fsynced, and that directory is renamed to OUT_DIR at the
// end. An existing OUT_DIR is refused unless it is an empty directory (a symlink to one counts);
// so are the working and the root directory. A rename that fails (another export finished there
// first) fails the run and leaves what is there.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/manifest/manifest.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/training/training_run.hpp"

namespace strata {

struct HfExportOptions {
  std::string dtype = "f32";                           // "f32" or "bf16"
  std::uint64_t shard_bytes = std::uint64_t{2} << 30;  // the most tensor bytes in one shard
};

struct HfExport {
  int tensors = 0;
  int merged_matrices = 0;  // matrices that had adapters
  int shards = 0;
  std::uint64_t tensor_bytes = 0;            // the index's total_size
  std::vector<std::string> tokenizer_files;  // copied beside the weights
  bool generation_config = false;            // generation_config.json written (copied or made)
};

// Throws ManifestError for a bad OUT_DIR or option, and as run_eval does otherwise.
HfExport export_hf(const Manifest& manifest, PluginRegistry& registry, const std::filesystem::path& checkpoint,
                   const std::filesystem::path& out_dir, const HfExportOptions& options,
                   const BackendFactory& backend = {});

}  // namespace strata
