// GPT-2 as the registry knows it (core/model/model_family.hpp): Hugging Face's GPT2LMHeadModel,
// five shape keys, a learned position table that loads whole, a tied head.
#include "core/model/gpt2/gpt2_family.hpp"

#include <algorithm>

#include "core/model/gpt2/gpt2_config.hpp"

namespace strata {

namespace {

class Gpt2Family final : public ModelFamily {
 public:
  std::string_view arch() const noexcept override { return "gpt2"; }
  std::string_view hf_architecture() const noexcept override { return "GPT2LMHeadModel"; }
  bool recognizes(std::span<const std::string> names) const override {
    return std::any_of(names.begin(), names.end(), [](const std::string& name) {
      return name == "wte.weight" || name == "transformer.wte.weight";
    });
  }

  std::vector<std::string_view> extra_keys() const override { return {}; }
  std::string_view hf_field(std::string_view key) const override {
    if (key == "d_model") return "n_embd";
    if (key == "vocab") return "vocab_size";
    if (key == "seq_len") return "n_positions";
    return key;  // n_layer, n_head
  }
  int default_vocab() const noexcept override { return 50257; }
  // GPT-2's position table has one row per position the model was trained for: the whole table
  // loads, so seq_len is n_positions.
  int default_seq_len(int max_positions) const override { return max_positions; }
  std::string seq_len_problem(int seq_len, int max_positions, const std::string& config_file) const override {
    if (seq_len == max_positions) return {};
    return "seq_len = " + std::to_string(seq_len) + " disagrees with " + config_file +
           "'s n_positions = " + std::to_string(max_positions) +
           ": GPT-2's position table loads whole (leave seq_len out)";
  }
  void read_keys(ModelKeys& keys, ModelShape& shape) const override {
    shape = gpt2_shape(gpt2_config(shape));  // its MLP 4 d_model wide, its head tied
    (void)keys;
  }

  HfModelConfig read_hf_config(const HfConfigFields& fields) const override {
    HfModelConfig config;
    config.arch = "gpt2";
    config.n_layer = fields.positive_int("n_layer");
    config.n_head = fields.positive_int("n_head");
    config.n_kv_head = 0;
    config.d_model = fields.positive_int("n_embd");
    config.vocab = fields.positive_int("vocab_size");
    config.max_positions = fields.positive_int("n_positions");
    config.d_ff = 4 * config.d_model;
    config.rope_theta = 0.0;
    config.norm_eps = fields.positive_number("layer_norm_epsilon", 1e-5);
    config.tie_embeddings = true;
    fields.require("n_inner", 4 * config.d_model, "Strata's GPT-2 MLP is 4 x n_embd wide");
    fields.require("activation_function", "gelu_new", "Strata's GPT-2 uses the tanh GELU (gelu_new)");
    fields.require("layer_norm_epsilon", 1e-5, "Strata's GPT-2 layer norm uses eps 1e-5");
    fields.require("tie_word_embeddings", true, "Strata's GPT-2 head reads the token embeddings");
    fields.require("add_cross_attention", false, "GPT-2 with cross-attention is an encoder-decoder");
    fields.require("scale_attn_by_inverse_layer_idx", false, "attention scores are scaled by 1/sqrt(head_dim) only");
    fields.require("reorder_and_upcast_attn", false, "not a GPT-2 variant Strata builds");
    fields.require("scale_attn_weights", true, "attention scores are scaled by 1/sqrt(head_dim)");
    // Hugging Face's GPT-2 drops 10% in three places while it trains; Strata's does not.
    std::string dropouts;
    for (const char* field : {"embd_pdrop", "attn_pdrop", "resid_pdrop"})
      if (const double p = fields.probability(field, 0.0); p > 0.0)
        dropouts += (dropouts.empty() ? "" : ", ") + std::string(field) + " = " + nlohmann::json(p).dump();
    if (!dropouts.empty())
      config.notes.push_back(fields.file() + ": " + dropouts +
                             ": Strata's GPT-2 trains without dropout (the lora plugin's `dropout` drops on its "
                             "adapters)");
    return config;
  }
  nlohmann::ordered_json hf_config(const ModelShape& shape, int max_positions) const override {
    const GPT2Config c = gpt2_config(shape);
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"n_embd", c.d_model},
            {"n_inner", 4 * c.d_model},
            {"vocab_size", c.vocab},
            {"n_positions", max_positions},
            {"n_ctx", max_positions},
            {"activation_function", "gelu_new"},
            {"layer_norm_epsilon", 1e-5},
            {"tie_word_embeddings", true},
            {"scale_attn_weights", true}};
  }
  // wpe has seq_len rows: the export's limit is the model's.
  int export_max_positions(const ModelShape& shape, std::optional<int>) const override { return shape.seq_len; }

  std::vector<ParameterTensor> parameter_tensors(const ModelShape& shape) const override {
    const std::int64_t C = shape.d_model, V = shape.vocab, T = shape.seq_len;
    std::vector<ParameterTensor> tensors = {{"wte.weight", {V, C}}, {"wpe.weight", {T, C}}};
    for (int l = 0; l < shape.n_layer; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      tensors.insert(tensors.end(), {{p + "ln_1.weight", {C}},
                                     {p + "ln_1.bias", {C}},
                                     {p + "attn.c_attn.weight", {C, 3 * C}},
                                     {p + "attn.c_attn.bias", {3 * C}},
                                     {p + "attn.c_proj.weight", {C, C}},
                                     {p + "attn.c_proj.bias", {C}},
                                     {p + "ln_2.weight", {C}},
                                     {p + "ln_2.bias", {C}},
                                     {p + "mlp.c_fc.weight", {C, 4 * C}},
                                     {p + "mlp.c_fc.bias", {4 * C}},
                                     {p + "mlp.c_proj.weight", {4 * C, C}},
                                     {p + "mlp.c_proj.bias", {C}}});
    }
    tensors.insert(tensors.end(), {{"ln_f.weight", {C}}, {"ln_f.bias", {C}}});
    return tensors;
  }
  ModelInfo info(const ModelShape& shape) const override {
    const GPT2Config c = gpt2_config(shape);
    return {"gpt2",
            c.n_layer,
            c.n_head,
            c.n_head,
            c.d_model,
            c.vocab,
            c.seq_len,
            parameter_count(shape),
            4 * c.d_model,
            c.d_model / c.n_head,
            c.padded_vocab(),
            0,
            true};
  }
  AttentionShape attention_shape(const ModelShape& shape, int batch) const override {
    return {batch, shape.seq_len, shape.n_head, shape.n_head, shape.n_head > 0 ? shape.d_model / shape.n_head : 0};
  }
  std::vector<AdapterTarget> adapter_targets(const ModelShape& shape) const override {
    return gpt2_adapter_targets(gpt2_config(shape));
  }
  std::vector<std::pair<std::string, MatmulShape>> block_matrices(const ModelShape& shape) const override {
    const std::int64_t C = shape.d_model;
    return {{"attn.c_attn.weight", {0, C, 3 * C, WeightLayout::in_out}},
            {"attn.c_proj.weight", {0, C, C, WeightLayout::in_out}},
            {"mlp.c_fc.weight", {0, C, 4 * C, WeightLayout::in_out}},
            {"mlp.c_proj.weight", {0, 4 * C, C, WeightLayout::in_out}}};
  }
  std::vector<std::pair<std::string, std::string>> shape_keys(const ModelShape& shape) const override {
    return {{"model.n_layer", std::to_string(shape.n_layer)},
            {"model.n_head", std::to_string(shape.n_head)},
            {"model.d_model", std::to_string(shape.d_model)},
            {"model.vocab", std::to_string(shape.vocab)},
            {"model.seq_len", std::to_string(shape.seq_len)}};
  }
};

}  // namespace

const ModelFamily& gpt2_family() {
  static const Gpt2Family family;
  return family;
}

}  // namespace strata
