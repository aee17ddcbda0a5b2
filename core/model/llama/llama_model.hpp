#pragma once
// The LLaMA family, following Hugging Face's modeling_llama: RMSNorm, rotary position embeddings
// in the rotate_half layout, grouped-query attention, a SwiGLU MLP, no biases, and an LM head
// that is untied unless tie_embeddings. Parameters carry HF names and torch.nn.Linear's
// (out, in) layout, so checkpoints load and save without transposing; the projections run as
// out_in matmuls.
#include <array>
#include <cstdint>

#include "core/model/llama/llama_config.hpp"
#include "core/model/model.hpp"
#include "strata/kernel.hpp"

namespace strata {

enum class LlamaParam : std::uint8_t {
  input_norm,
  q_proj,
  k_proj,
  v_proj,
  o_proj,
  post_attention_norm,
  gate_proj,
  up_proj,
  down_proj,
  count
};

// A block's saved activations; `output` is the next block's input.
enum class LlamaActivation : std::uint8_t {
  norm1,  // input_layernorm(x)
  norm1_rstd,
  q,  // after RoPE, as attention reads them
  k,
  v,
  attention_saved,
  atty,
  residual2,  // x + o_proj(atty)
  norm2,
  norm2_rstd,
  gate,
  up,
  swiglu,  // silu(gate) * up
  output,
  count
};

enum class LlamaWorkspace : std::uint8_t {
  d_residual,
  d_norm,
  d_atty,
  d_q,
  d_k,
  d_v,
  d_gate,
  d_up,
  d_swiglu,
  attention_scratch,
  count
};

inline constexpr std::size_t kLlamaParamCount = static_cast<std::size_t>(LlamaParam::count);
inline constexpr std::size_t kLlamaActivationCount = static_cast<std::size_t>(LlamaActivation::count);
inline constexpr std::size_t kLlamaWorkspaceCount = static_cast<std::size_t>(LlamaWorkspace::count);

// "self_attn.q_proj.weight" (a block parameter, prefixed "model.layers.{i}.").
std::string_view llama_param_name(LlamaParam param) noexcept;

class LlamaModel final : public Model {
 public:
  LlamaModel(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options);

  const LlamaConfig& config() const noexcept { return config_; }
  std::string_view arch() const noexcept override { return "llama"; }
  ModelInfo info() const override { return config_.info(); }
  nlohmann::json config_json() const override;
  int n_layer() const noexcept override { return config_.n_layer; }
  int seq_len() const noexcept override { return config_.seq_len; }
  std::vector<std::int64_t> stored_shape(const ParameterRows& rows) const override;
  bool ignorable_file_tensor(std::string_view name) const override;
  void init_base_weights(std::uint64_t seed) override;

  void embed_forward() override;
  void layer_forward(int layer) override;
  double head_forward() override;
  void head_backward(float dloss) override;
  void layer_backward(int layer) override;
  void embed_backward() override;

 private:
  std::vector<int> cheap_activation_kinds() const override;
  int attention_saved_kind() const override;
  void recompute_cheap_activations(int layer) override;
  void recompute_attention(int layer) override;
  void attention_forward(int layer);  // into act(atty) and the kernel's saved row
  using LA = LlamaActivation;
  const ParameterRows& parameter(int layer, LlamaParam which) const {
    return parameters()[static_cast<std::size_t>(
        layer_parameters_[static_cast<std::size_t>(layer)][static_cast<std::size_t>(which)])];
  }
  int activation_row(int layer, LA which) const { return Model::activation_row(layer, static_cast<int>(which)); }
  float* act(int layer, LA which) const {
    return staging_.buffer(static_cast<int>(which), activation_row(layer, which));
  }
  void save_activation(int layer, LA which) { staging_.store(static_cast<int>(which), activation_row(layer, which)); }
  void load_activation(int layer, LA which) { staging_.load(static_cast<int>(which), activation_row(layer, which)); }
  void load_input(int layer);
  const float* layer_input(int layer) const;
  float* ws(LlamaWorkspace which) const { return store_.f32(workspace_rows_[static_cast<std::size_t>(which)]); }
  const float* gain(int layer, LlamaParam which) const { return store_.values(parameter(layer, which)).f32(); }
  // A norm gain's gradient (a frozen one writes into the sink).
  float* grad(int layer, LlamaParam which) const { return norm_grad_of(parameter(layer, which)); }
  void project_forward(int layer, LlamaParam weight, float* out, const float* inp, std::int64_t in_features,
                       std::int64_t out_features);
  void project_backward(int layer, LlamaParam weight, float* dinp, const float* dout, const float* inp,
                        std::int64_t in_features, std::int64_t out_features, GradientWrite dinp_write);
  void norm1_forward(int layer);
  void norm2_forward(int layer);
  void swiglu_forward(int layer);
  void rope(float* x, std::int64_t stride, int heads, bool inverse);
  AttentionInputs attention_inputs(int layer) const;
  int head_weight_row() const;

  LlamaConfig config_;
  Kernel& attention_;
  AttentionShape attention_shape_;
  int embed_ = -1, norm_ = -1, lm_head_ = -1;  // indices into parameters(); lm_head_ = embed_ when tied
  std::vector<std::array<int, kLlamaParamCount>> layer_parameters_;
  int encoded_row_ = -1, final_norm_row_ = -1, final_rstd_row_ = -1;
  std::array<int, kLlamaWorkspaceCount> workspace_rows_{};
  ActivationStaging staging_{store_, static_cast<int>(kLlamaActivationCount)};
  int input_staging_row_ = -1;
};

}  // namespace strata
