// Mistral as the registry knows it: LLaMA (core/model/llama/llama_family.hpp) with a sliding
// attention window, Hugging Face's MistralForCausalLM (config.json's sliding_window, null for none;
// [model] sliding_window, 0 for none).
#include "core/model/mistral/mistral_family.hpp"

#include "core/model/llama/llama_family.hpp"

namespace strata {

namespace {

class MistralFamily final : public LlamaFamily {
 public:
  std::string_view arch() const noexcept override { return "mistral"; }
  std::string_view hf_architecture() const noexcept override { return "MistralForCausalLM"; }

  std::vector<std::string_view> extra_keys() const override {
    std::vector<std::string_view> keys = LlamaFamily::extra_keys();
    keys.push_back("sliding_window");
    return keys;
  }
  void read_keys(ModelKeys& keys, ModelShape& shape) const override {
    LlamaFamily::read_keys(keys, shape);
    const HfModelConfig* hf = keys.config();
    shape.sliding_window = keys.integer("sliding_window", 0, 0, 1 << 24, hf ? hf->sliding_window : 0, "sliding_window");
  }
  HfModelConfig read_hf_config(const HfConfigFields& fields) const override {
    HfModelConfig config = LlamaFamily::read_hf_config(fields);
    config.sliding_window = fields.has("sliding_window") ? fields.positive_int("sliding_window") : 0;
    return config;
  }
  nlohmann::ordered_json hf_config(const ModelShape& shape, int max_positions) const override {
    nlohmann::ordered_json config = LlamaFamily::hf_config(shape, max_positions);
    config["sliding_window"] = shape.sliding_window > 0 ? nlohmann::ordered_json(shape.sliding_window) : nullptr;
    return config;
  }
  std::vector<std::pair<std::string, std::string>> shape_keys(const ModelShape& shape) const override {
    std::vector<std::pair<std::string, std::string>> keys = LlamaFamily::shape_keys(shape);
    keys.emplace_back("model.sliding_window", std::to_string(shape.sliding_window));
    return keys;
  }

 protected:
  // MistralForCausalLM's config has no attention_bias: its projections have none.
  void write_attention_variant(nlohmann::ordered_json& config) const override { (void)config; }
};

}  // namespace

const ModelFamily& mistral_family() {
  static const MistralFamily family;
  return family;
}

}  // namespace strata
