// Gemma (first generation) as the registry knows it: LLaMA (core/model/llama/llama_family.hpp) with
// its own head width (head_dim in [model] and config.json, 256 where config.json has none, as
// GemmaConfig), the tanh GELU in a GeGLU MLP (config.json's hidden_activation must say
// "gelu_pytorch_tanh"; without it, hidden_act may also say "gelu", as transformers read it), and a
// head always tied to the embeddings; Hugging Face's GemmaForCausalLM. Its files hold LLaMA's names (a
// tied LLaMA's), so a checkpoint cannot say it is Gemma: [model] arch or config.json does.
#include "core/model/gemma/gemma_family.hpp"

#include "core/model/llama/llama_family.hpp"

namespace strata {

namespace {

constexpr const char* kTanhGelu = "gelu_pytorch_tanh";

class GemmaFamily final : public LlamaFamily {
 public:
  std::string_view arch() const noexcept override { return "gemma"; }
  std::string_view hf_architecture() const noexcept override { return "GemmaForCausalLM"; }
  int default_vocab() const noexcept override { return 256000; }

  std::vector<std::string_view> extra_keys() const override {
    std::vector<std::string_view> keys = LlamaFamily::extra_keys();
    keys.push_back("head_dim");
    return keys;
  }
  void read_keys(ModelKeys& keys, ModelShape& shape) const override {
    const HfModelConfig* hf = keys.config();
    // 0: d_model / n_head. Read first: LLaMA's checks of the head's parity read it.
    shape.own_head_dim = keys.integer("head_dim", 0, 0, 1 << 16, hf ? hf->own_head_dim : 0, "head_dim");
    LlamaFamily::read_keys(keys, shape);
    if (!shape.tie_embeddings)
      keys.report_error("tie_embeddings", "arch = \"gemma\" always ties its head to the embeddings");
    if (keys.shape_as_written() && shape.own_head_dim % 2 != 0)
      keys.report_error("head_dim", "head_dim = " + std::to_string(shape.own_head_dim) +
                                        " is odd: RoPE rotates pairs of a head's dimensions, so it must be even");
  }
  nlohmann::ordered_json hf_config(const ModelShape& shape, int max_positions) const override {
    nlohmann::ordered_json config = LlamaFamily::hf_config(shape, max_positions);
    config["hidden_act"] = kTanhGelu;
    config["hidden_activation"] = kTanhGelu;
    config.erase("mlp_bias");  // not a GemmaConfig field
    return config;
  }
  std::vector<std::pair<std::string, std::string>> shape_keys(const ModelShape& shape) const override {
    std::vector<std::pair<std::string, std::string>> keys = LlamaFamily::shape_keys(shape);
    keys.emplace_back("model.head_dim", std::to_string(shape.head_dim()));
    return keys;
  }

 protected:
  bool ties_by_default() const override { return true; }
  void read_heads_and_activation(const HfConfigFields& fields, HfModelConfig& config) const override {
    config.own_head_dim = fields.positive_int("head_dim", 256);  // GemmaConfig's default
    // hidden_activation names the MLP's GELU. Without it, transformers ran Gemma's MLP with the tanh
    // GELU whatever hidden_act said (the first hub files say "gelu" there, for weights trained
    // with the tanh form), so "gelu" is read as that; an explicit exact GELU is refused, not run.
    if (fields.has("hidden_activation"))
      fields.require("hidden_activation", kTanhGelu, "Gemma's MLP is GeGLU with the tanh GELU (\"gelu_pytorch_tanh\")");
    else if (fields.text("hidden_act", kTanhGelu) != "gelu")
      fields.require("hidden_act", kTanhGelu, "Gemma's MLP is GeGLU with the tanh GELU (\"gelu_pytorch_tanh\")");
    if (!config.tie_embeddings)
      fields.refuse("tie_word_embeddings", "false is not Gemma: its head is always the tied embedding");
  }
};

}  // namespace

const ModelFamily& gemma_family() {
  static const GemmaFamily family;
  return family;
}

}  // namespace strata
