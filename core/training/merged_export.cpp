#include "core/training/merged_export.hpp"

#include <map>
#include <string>
#include <vector>

#include "core/checkpoint/safetensors.hpp"
#include "core/training/evaluation_model.hpp"
#include "core/util/atomic_file.hpp"

namespace strata {

MergedExport export_merged(const Manifest& manifest, PluginRegistry& registry, const std::filesystem::path& checkpoint,
                           const std::filesystem::path& out, const BackendFactory& backend) {
  EvaluationModel run = open_for_evaluation(manifest, registry, checkpoint, backend);
  Model& model = *run.model;
  MergedExport result;
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  values.reserve(model.parameters().size());
  for (const ParameterRows& rows : model.parameters()) {
    if (rows.role == ParameterRole::adapter) continue;  // folded into its matrix
    values.push_back(model.merged_values(rows));
    if (model.adapted(rows)) ++result.merged_matrices;
    tensors.push_back({rows.name, model.stored_shape(rows), values.back(), {}, "F32"});
  }
  const std::string bytes = encode_safetensors(
      tensors, {{"format", "pt"}, {"producer", "strata"}, {"strata_merged_from", checkpoint.string()}});
  write_file_atomically(out, bytes);
  result.tensors = static_cast<int>(tensors.size());
  result.bytes = bytes.size();
  return result;
}

}  // namespace strata
