#pragma once
// The LLaMA family's descriptor (llama_family.cpp). A family built on LLaMA's blocks (Qwen2)
// derives from it and says what differs.
#include "core/model/llama/llama_config.hpp"
#include "core/model/model_family.hpp"

namespace strata {

class LlamaFamily : public ModelFamily {
 public:
  std::string_view arch() const noexcept override { return "llama"; }
  std::string_view hf_architecture() const noexcept override { return "LlamaForCausalLM"; }
  bool recognizes(std::span<const std::string> tensor_names) const override;

  std::vector<std::string_view> extra_keys() const override;
  std::string_view hf_field(std::string_view key) const override;
  int default_vocab() const noexcept override { return 32000; }
  int default_seq_len(int max_positions) const override;
  std::string seq_len_problem(int seq_len, int max_positions, const std::string& config_file) const override;
  void read_keys(ModelKeys& keys, ModelShape& shape) const override;
  HfModelConfig read_hf_config(const HfConfigFields& fields) const override;
  nlohmann::ordered_json hf_config(const ModelShape& shape, int max_positions) const override;
  int export_max_positions(const ModelShape& shape, std::optional<int> source_max_positions) const override;

  std::vector<ParameterTensor> parameter_tensors(const ModelShape& shape) const override;
  ModelInfo info(const ModelShape& shape) const override { return llama_info(shape, arch(), parameter_count(shape)); }
  AttentionShape attention_shape(const ModelShape& shape, int batch) const override {
    return {batch, shape.seq_len, shape.n_head, shape.n_kv_head, shape.head_dim(), shape.sliding_window};
  }
  std::vector<AdapterTarget> adapter_targets(const ModelShape& shape) const override {
    return llama_adapter_targets(shape);
  }
  std::vector<std::pair<std::string, MatmulShape>> block_matrices(const ModelShape& shape) const override;
  std::vector<std::pair<std::string, std::string>> shape_keys(const ModelShape& shape) const override;

 protected:
  // Whether the head is tied when neither [model] nor config.json says (HF's tie_word_embeddings).
  virtual bool ties_by_default() const { return false; }
  // config.json's head_dim and MLP activation: LLaMA's are hidden_size / num_attention_heads and
  // silu; a family with its own reads them here.
  virtual void read_heads_and_activation(const HfConfigFields& fields, HfModelConfig& config) const;
  // What config.json says of the projections' biases: LLaMA has none; a family with them says so.
  virtual void require_attention_variant(const HfConfigFields& fields) const;
  virtual void write_attention_variant(nlohmann::ordered_json& config) const;
};

const ModelFamily& llama_family();

}  // namespace strata
