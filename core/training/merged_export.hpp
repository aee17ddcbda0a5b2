#pragma once
// `strata export --merge`: a trained run as one Hugging Face safetensors file in the family's
// names, every weight f32, each adapted matrix with its adapters folded in (W + s A B for LoRA), so
// the file evaluates as the adapted model with no plugin at all. A quantized base is written as the
// values its matmuls computed with.
#include <filesystem>

#include "core/manifest/manifest.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/training/training_run.hpp"

namespace strata {

struct MergedExport {
  int tensors = 0;
  int merged_matrices = 0;  // matrices that had adapters
  std::uint64_t bytes = 0;  // of the file
};

// Writes `out` atomically. Throws as run_eval does.
MergedExport export_merged(const Manifest& manifest, PluginRegistry& registry, const std::filesystem::path& checkpoint,
                           const std::filesystem::path& out, const BackendFactory& backend = {});

}  // namespace strata
