#pragma once
// GPT-2, written out: named parameter, gradient, optimizer-state, activation and workspace rows,
// and one explicit forward and backward per piece (embedding, block, head) through the backend's
// ops. Parameters carry Hugging Face GPT-2 names and layouts (Conv1D: (in, out) matrices).
#include <array>
#include <cstdint>

#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/model.hpp"
#include "strata/kernel.hpp"

namespace strata {

enum class LayerParam : std::uint8_t {
  ln1_weight,
  ln1_bias,
  qkv_weight,
  qkv_bias,
  attn_proj_weight,
  attn_proj_bias,
  ln2_weight,
  ln2_bias,
  fc_weight,
  fc_bias,
  fc_proj_weight,
  fc_proj_bias,
  count
};
enum class GlobalParam : std::uint8_t { wte, wpe, lnf_weight, lnf_bias, count };
// A block's saved activations; `output` is also the next block's input, so dropping a block's
// activations keeps it.
enum class LayerActivation : std::uint8_t {
  ln1,
  ln1_mean,
  ln1_rstd,
  qkv,
  attention_saved,
  atty,
  residual2,
  ln2,
  ln2_mean,
  ln2_rstd,
  fch,
  fch_gelu,
  output,
  count
};
// Backward scratch, shared by all blocks since they run one at a time.
enum class Workspace : std::uint8_t { d_residual, d_ln, d_atty, d_qkv, d_fch, d_fch_gelu, attention_scratch, count };

inline constexpr float kLayerNormEps = 1e-5f;  // GPT-2's LayerNorm epsilon

inline constexpr std::size_t kLayerParamCount = static_cast<std::size_t>(LayerParam::count);
inline constexpr std::size_t kGlobalParamCount = static_cast<std::size_t>(GlobalParam::count);
inline constexpr std::size_t kLayerActivationCount = static_cast<std::size_t>(LayerActivation::count);
inline constexpr std::size_t kWorkspaceCount = static_cast<std::size_t>(Workspace::count);

// HF GPT-2 names: "ln_1.weight" for a block param (prefixed "h.{i}."), "wte.weight" for globals.
std::string_view layer_param_name(LayerParam param) noexcept;
std::string_view global_param_name(GlobalParam param) noexcept;
std::string_view layer_activation_name(LayerActivation activation) noexcept;

class GPT2Model final : public Model {
 public:
  // `batch` is the micro-batch size: activations are sized for it. `attention` is the kernel the
  // manifest chose (the backend's own, or a plugin's).
  GPT2Model(const GPT2Config& config, int batch, Backend& backend, Kernel& attention,
            const OptimizerStateLayout& optimizer_state, Allocation allocation = Allocation::now,
            StorageTypes storage = {}, Purpose purpose = Purpose::training, TrainablePlan trainable = {});

  const GPT2Config& config() const noexcept { return config_; }
  std::string_view arch() const noexcept override { return "gpt2"; }
  ModelInfo info() const override { return config_.info(); }
  nlohmann::json config_json() const override;
  int n_layer() const noexcept override { return config_.n_layer; }
  int seq_len() const noexcept override { return config_.seq_len; }
  std::vector<std::int64_t> stored_shape(const ParameterRows& rows) const override;
  std::vector<std::string> file_names(const ParameterRows& rows) const override;
  bool ignorable_file_tensor(std::string_view name) const override;
  void init_base_weights(std::uint64_t seed) override;

  // A parameter's f32 value (the master copy under bf16 storage).
  TensorView param(GlobalParam which) const noexcept;
  TensorView param(int layer, LayerParam which) const noexcept;
  int activation_row(int layer, LayerActivation which) const {
    return Model::activation_row(layer, static_cast<int>(which));
  }

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
  float* act(int layer, LayerActivation which) noexcept;
  void save_activation(int layer, LayerActivation which);
  void load_activation(int layer, LayerActivation which);
  void load_input(int layer);  // the previous block's output, into the input staging
  const float* layer_input(int layer) noexcept;
  const float* vec(int layer, LayerParam which) const noexcept;  // an f32 vector parameter
  // Null for a frozen matrix, bias or table; a frozen LayerNorm gain or bias writes into the sink.
  float* grad(int layer, LayerParam which) const noexcept;
  float* grad(GlobalParam which) const noexcept;
  float* ws(Workspace which) const noexcept { return store_.f32(workspace_rows_[static_cast<std::size_t>(which)]); }
  // A block's projections (in_out layout), whose weight row may be bf16.
  void project_forward(int layer, LayerParam weight, LayerParam bias, float* out, const float* inp,
                       std::int64_t in_features, std::int64_t out_features);
  void project_backward(int layer, LayerParam weight, LayerParam bias, float* dinp, const float* dout, const float* inp,
                        std::int64_t in_features, std::int64_t out_features);
  void layernorm1_forward(int layer);
  void layernorm2_forward(int layer);
  void gelu_forward(int layer);
  AttentionInputs attention_inputs(int layer);

  GPT2Config config_;
  StorageTypes storage_types_;
  Kernel& attention_;
  AttentionShape attention_shape_;
  std::array<int, kGlobalParamCount> global_parameters_{};  // indices into parameters()
  std::vector<std::array<int, kLayerParamCount>> layer_parameters_;
  int encoded_row_ = -1, lnf_row_ = -1, lnf_mean_row_ = -1, lnf_rstd_row_ = -1;
  std::array<int, kWorkspaceCount> workspace_rows_{};
  ActivationStaging staging_{store_, static_cast<int>(kLayerActivationCount)};
  int input_staging_row_ = -1;  // bf16 activations: where the previous block's output is widened
};

}  // namespace strata
