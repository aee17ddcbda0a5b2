#pragma once
// The manifest's [model] table: which family, and its shape (make_model.hpp builds the Model). What
// the shape means for the family is the family's descriptor's (core/model/model_family.hpp).
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/model/adapter_targets.hpp"
#include "core/model/model_family.hpp"
#include "core/model/model_shape.hpp"
#include "strata/ops.hpp"

namespace strata {

struct ModelSpec {
  // A Hugging Face model directory ([model] from): its config.json gave the keys below, and its
  // weights are the run's starting weights (core/checkpoint/hf_directory.hpp).
  std::optional<std::filesystem::path> from;
  // What its config.json asks that Strata does not do (GPT-2's dropouts): the commands warn.
  std::vector<std::string> notes;
  std::string arch = "gpt2";  // a family of core/model/model_families.cpp
  // GPT-2 124M's shape, as [model] gives it without keys.
  ModelShape shape = {12, 12, 12, 768, 3072, 50257, 1024, 10000.0, {}, 1e-5, true, false};

  const ModelFamily& family() const { return model_family(arch); }
  int n_layer() const noexcept { return shape.n_layer; }
  int vocab() const noexcept { return shape.vocab; }
  int seq_len() const noexcept { return shape.seq_len; }
  ModelInfo info() const { return family().info(shape); }
  std::int64_t parameter_count() const { return family().parameter_count(shape); }
  std::vector<std::pair<std::string, MatmulShape>> block_matrices() const { return family().block_matrices(shape); }
  std::vector<AdapterTarget> adapter_targets() const { return family().adapter_targets(shape); }
  AttentionShape attention_shape(int batch) const { return family().attention_shape(shape, batch); }
};

}  // namespace strata
