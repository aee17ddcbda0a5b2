#pragma once
// The LLaMA family, following Hugging Face's modeling_llama: RMSNorm, rotary position embeddings
// in the rotate_half layout, grouped-query attention, a SwiGLU MLP, and an LM head that is untied
// unless tie_embeddings. No biases unless attention_bias (q, k and v biases, as HF's LlamaConfig
// and Qwen2 have them). Parameters carry HF names and torch.nn.Linear's (out, in) layout, so
// checkpoints load and save without transposing.
#include <cstdint>

#include "core/model/llama/llama_config.hpp"
#include "core/model/model_family.hpp"
#include "core/model/transformer.hpp"

namespace strata {

namespace llama {
// A block's parameters, in table order ("model.layers.{l}." + their HF names); the q, k and v
// biases exist only with attention_bias.
struct P {
  enum : int {
    input_norm,
    q_proj,
    k_proj,
    v_proj,
    o_proj,
    post_attention_norm,
    gate_proj,
    up_proj,
    down_proj,
    q_bias,
    k_bias,
    v_bias
  };
};
struct G {  // global parameters; lm_head is embed when tied
  enum : int { embed, norm, lm_head };
};
// A block's saved activations; `output` is the next block's input. q and k are kept after RoPE;
// `swiglu` is the gated MLP's product (GeGLU's under LlamaMath::gelu_mlp).
struct A {
  enum : int {
    norm1,
    norm1_rstd,
    q,
    k,
    v,
    attention_saved,
    atty,
    residual2,
    norm2,
    norm2_rstd,
    gate,
    up,
    swiglu,
    output
  };
};
struct GA {
  enum : int { encoded, final_norm, final_rstd };
};
struct W {
  enum : int {
    d_residual,
    d_norm,
    d_atty,
    d_q,
    d_k,
    d_v,
    d_gate,
    d_up,
    d_swiglu
  };  // then ws.d_attention (Transformer)
};
}  // namespace llama

// What a family built on LLaMA's blocks changes in their math (Gemma: core/model/gemma/).
struct LlamaMath {
  float norm_weight_offset = 0.0f;  // each RMSNorm's gain is offset + w (Gemma stores w for 1 + w)
  float embedding_scale = 1.0f;     // the embedding's rows times this (Gemma: sqrt(d_model) in f32)
  bool gelu_mlp = false;            // GeGLU, gelu_tanh(gate) * up, instead of SwiGLU
};

class LlamaModel : public Transformer {
 public:
  LlamaModel(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options)
      : LlamaModel(config, backend, attention, options, LlamaMath{}) {}

  const LlamaConfig& config() const noexcept { return config_; }
  std::string_view arch() const noexcept override { return "llama"; }
  ModelInfo info() const override { return model_family(arch()).info(config_); }
  nlohmann::json config_json() const override;
  std::vector<std::int64_t> stored_shape(const ParameterRows& rows) const override;
  bool ignorable_file_tensor(std::string_view name) const override;
  void init_base_weights(std::uint64_t seed) override;

  void embed_forward() override;
  void embed_backward() override;

 protected:
  LlamaModel(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options,
             const LlamaMath& math);

 private:
  void block_forward(int l) override;
  void block_backward(int l) override;
  const float* final_norm() override;
  int head_weight_row() const override { return global(llama::G::lm_head).param; }
  void final_backward(float dloss) override;
  AttentionInputs qkv(int l);
  int bias(int which) const { return config_.attention_bias ? which : kNoBias; }
  void rmsnorm(int l, int out, int rstd, int x, int weight) {
    Transformer::rmsnorm(l, out, rstd, x, weight, static_cast<float>(config_.norm_eps), math_.norm_weight_offset);
  }
  void rmsnorm_backward(int l, float* dx, const float* dy, int x, int weight, int rstd) {
    Transformer::rmsnorm_backward(l, dx, dy, x, weight, rstd, math_.norm_weight_offset);
  }
  void gated(int l) {  // the MLP's product from gate and up
    if (math_.gelu_mlp)
      geglu(l, llama::A::swiglu, llama::A::gate, llama::A::up);
    else
      swiglu(l, llama::A::swiglu, llama::A::gate, llama::A::up);
  }
  void gated_backward(int l, float* dgate, float* dup, const float* dy) {
    if (math_.gelu_mlp)
      geglu_backward(l, dgate, dup, dy, llama::A::gate, llama::A::up);
    else
      swiglu_backward(l, dgate, dup, dy, llama::A::gate, llama::A::up);
  }

  LlamaConfig config_;
  LlamaMath math_;
};

}  // namespace strata
