#pragma once
// GPT-2 (Radford et al. 2019; Hugging Face's GPT2LMHeadModel): learned position embeddings,
// pre-LayerNorm blocks with a GELU MLP, biases everywhere, and an LM head tied to the token
// embedding. Parameters carry Hugging Face names and Conv1D's (in, out) layout.
#include <cstdint>

#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/gpt2/gpt2_family.hpp"
#include "core/model/transformer.hpp"

namespace strata {

namespace gpt2 {
// A block's parameters, in table order ("h.{l}." + their HF names, gpt2_model.cpp).
struct P {
  enum : int {
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
    fc_proj_bias
  };
};
struct G {  // global parameters
  enum : int { wte, wpe, lnf_weight, lnf_bias };
};
// A block's saved activations; `output` is also the next block's input.
struct A {
  enum : int {
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
    output
  };
};
struct GA {  // global activations
  enum : int { encoded, lnf, lnf_mean, lnf_rstd };
};
// Backward scratch, shared by all blocks since they run one at a time.
struct W {
  enum : int { d_residual, d_ln, d_atty, d_qkv, d_fch, d_fch_gelu };  // then ws.d_attention (Transformer)
};
inline constexpr float kLayerNormEps = 1e-5f;  // GPT-2's LayerNorm epsilon
}  // namespace gpt2

class GPT2Model final : public Transformer {
 public:
  GPT2Model(const GPT2Config& config, Backend& backend, Kernel& attention, const ModelOptions& options);

  const GPT2Config& config() const noexcept { return config_; }
  std::string_view arch() const noexcept override { return "gpt2"; }
  ModelInfo info() const override { return gpt2_family().info(gpt2_shape(config_)); }
  nlohmann::json config_json() const override;
  std::vector<std::int64_t> stored_shape(const ParameterRows& rows) const override;
  std::vector<std::string> file_names(const ParameterRows& rows) const override;
  bool ignorable_file_tensor(std::string_view name) const override;
  void init_base_weights(std::uint64_t seed) override;

  void embed_forward() override;
  void embed_backward() override;

 private:
  void block_forward(int l) override;
  void block_backward(int l) override;
  const float* final_norm() override;
  int head_weight_row() const override { return global(gpt2::G::wte).param; }
  void final_backward(float dloss) override;
  AttentionInputs qkv(int l);  // q, k and v: three column blocks of the packed (N, 3C) qkv

  GPT2Config config_;
};

}  // namespace strata
