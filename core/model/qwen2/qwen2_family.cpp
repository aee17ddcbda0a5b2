// Qwen2 as the registry knows it: LLaMA (core/model/llama/llama_family.hpp) with biases on the q,
// k and v projections, Hugging Face's Qwen2ForCausalLM. Its checkpoints are LLaMA's names plus
// those biases, so the list asks it before LLaMA.
#include "core/model/qwen2/qwen2_family.hpp"

#include <algorithm>

#include "core/model/llama/llama_family.hpp"
#include "core/model/qwen2/qwen2_config.hpp"

namespace strata {

namespace {

class Qwen2Family final : public LlamaFamily {
 public:
  std::string_view arch() const noexcept override { return "qwen2"; }
  std::string_view hf_architecture() const noexcept override { return "Qwen2ForCausalLM"; }
  // Any block's biases will do (a save leaves frozen blocks out).
  bool recognizes(std::span<const std::string> names) const override {
    return std::any_of(names.begin(), names.end(), [](const std::string& name) {
      return name.starts_with("model.layers.") && name.ends_with(".self_attn.q_proj.bias");
    });
  }
  void read_keys(ModelKeys& keys, ModelShape& shape) const override {
    LlamaFamily::read_keys(keys, shape);
    apply_qwen2(shape);
  }
  HfModelConfig read_hf_config(const HfConfigFields& fields) const override {
    HfModelConfig config = LlamaFamily::read_hf_config(fields);
    apply_qwen2(config);
    return config;
  }

 protected:
  void require_attention_variant(const HfConfigFields& fields) const override {
    fields.require("use_sliding_window", false, "Strata's attention is full causal attention");
  }
  void write_attention_variant(nlohmann::ordered_json& config) const override { config["use_sliding_window"] = false; }
};

}  // namespace

const ModelFamily& qwen2_family() {
  static const Qwen2Family family;
  return family;
}

}  // namespace strata
