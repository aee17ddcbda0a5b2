#pragma once
// Qwen2 (Hugging Face's Qwen2ForCausalLM) is LLaMA with biases on the q, k and v projections:
// the same RMSNorm, rotate_half RoPE, grouped-query attention, SwiGLU MLP and tensor names
// ("model.layers.{i}.self_attn.q_proj.bias" beside the weights), and its config.json uses
// LlamaConfig's keys. So its shape is a LlamaConfig with attention_bias on.
#include "core/model/llama/llama_config.hpp"

namespace strata {

inline void apply_qwen2(LlamaConfig& config) {
  config.attention_bias = true;
}

}  // namespace strata
