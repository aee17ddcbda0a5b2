#pragma once
// A model family, everything Strata knows of it behind one descriptor in its own folder
// (core/model/<family>/), registered in one list (core/model/model_families.cpp): its `arch` name
// and Hugging Face class; its keys in [model] and its config.json, read and written; its parameter
// count, adapter targets and quantizable matrices. Its model (the math, on the kernels) is built by
// the second list, core/model/make_model.cpp, which pairs each descriptor with its model's
// constructor: the descriptors are part of the formats library, which reads users' files and has
// no kernels (the fuzz targets link it alone). Nothing outside the family folders and the two lists
// compares an arch name or includes a family's header (docs/architecture.md, "Adding a family").
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/adapter_targets.hpp"
#include "core/model/hf_model_config.hpp"
#include "core/model/model_keys.hpp"
#include "core/model/model_shape.hpp"
#include "strata/host_services.hpp"
#include "strata/ops.hpp"

namespace strata {

// A parameter as a checkpoint holds it: Hugging Face's name and shape (the real vocabulary's rows).
struct ParameterTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t elements() const;
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  // Names ------------------------------------------------------------------------------------
  virtual std::string_view arch() const noexcept = 0;             // [model] arch, config.json's model_type
  virtual std::string_view hf_architecture() const noexcept = 0;  // config.json's architectures[0]
  // Whether a checkpoint with these tensor names loads into this family's model.
  virtual bool recognizes(std::span<const std::string> tensor_names) const = 0;

  // [model] and config.json ---------------------------------------------------------------------
  // The keys this family reads beyond the five every family has (n_layer, n_head, d_model, vocab,
  // seq_len), and config.json's name for each of the five ("n_layer" -> "num_hidden_layers").
  virtual std::vector<std::string_view> extra_keys() const = 0;
  virtual std::string_view hf_field(std::string_view key) const = 0;
  virtual int default_vocab() const noexcept = 0;
  // seq_len's default from config.json's max_positions, and what is wrong with a written one.
  virtual int default_seq_len(int max_positions) const = 0;
  virtual std::string seq_len_problem(int seq_len, int max_positions, const std::string& config_file) const = 0;
  // The extra keys into `shape` (whose five are read), with their checks.
  virtual void read_keys(ModelKeys& keys, ModelShape& shape) const = 0;
  virtual HfModelConfig read_hf_config(const HfConfigFields& fields) const = 0;
  // config.json's family keys for `shape` (the caller adds the tokens' ids, torch_dtype, producer).
  virtual nlohmann::ordered_json hf_config(const ModelShape& shape, int max_positions) const = 0;
  // The position limit an export writes: the model's seq_len, or the source directory's when the
  // family has no position table to outgrow.
  virtual int export_max_positions(const ModelShape& shape, std::optional<int> source_max_positions) const = 0;

  // The model ------------------------------------------------------------------------------------
  // Every parameter of a model of this shape (its model declares the same names and shapes:
  // tests/test_model_families.cpp); the parameter count is their sum.
  virtual std::vector<ParameterTensor> parameter_tensors(const ModelShape& shape) const = 0;
  std::int64_t parameter_count(const ModelShape& shape) const;
  virtual ModelInfo info(const ModelShape& shape) const = 0;
  virtual AttentionShape attention_shape(const ModelShape& shape, int batch) const = 0;
  virtual std::vector<AdapterTarget> adapter_targets(const ModelShape& shape) const = 0;
  // The distinct shapes of a block's weight matrices, each with a name to report: what quantized
  // storage must fit, checked before the model is built.
  virtual std::vector<std::pair<std::string, MatmulShape>> block_matrices(const ModelShape& shape) const = 0;
  // The shape keys two runs must share to be compared step for step (`strata ab`), as
  // (manifest key, value as text), in manifest order.
  virtual std::vector<std::pair<std::string, std::string>> shape_keys(const ModelShape& shape) const = 0;
};

// The list, in the order messages name the families.
std::span<const ModelFamily* const> model_families();
// The family named `arch`, or null.
const ModelFamily* find_model_family(std::string_view arch);
// The family named `arch`; std::invalid_argument for a name no family has (the manifest refuses
// those first).
const ModelFamily& model_family(std::string_view arch);
// "gpt2, llama, qwen2, mistral or gemma", for messages.
std::string model_family_names(std::string_view last_separator = " or ");

}  // namespace strata
