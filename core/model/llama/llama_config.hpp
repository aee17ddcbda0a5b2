#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "strata/host_services.hpp"

namespace strata {

// A LLaMA-family shape, as Hugging Face's LlamaConfig names it (hidden_size = d_model,
// intermediate_size = d_ff, num_key_value_heads = n_kv_head, max_position_embeddings = seq_len).
// Llama 3's RoPE scaling (HF's rope_scaling with rope_type "llama3", Llama 3.1 and 3.2): the
// inverse frequencies of wavelengths above original_max_positions / low_freq_factor are divided by
// factor, those below original_max_positions / high_freq_factor kept, and those between blended.
// factor 0: no scaling.
struct RopeScaling {
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_positions = 8192;
  bool operator==(const RopeScaling&) const = default;
};

struct LlamaConfig {
  int n_layer = 12;
  int n_head = 12;
  int n_kv_head = 12;
  int d_model = 768;
  int d_ff = 2048;
  int vocab = 32000;
  int seq_len = 1024;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = {};
  double norm_eps = 1e-6;
  bool tie_embeddings = false;
  bool attention_bias = false;  // q, k and v projections with biases (HF's attention_bias; Qwen2)
  std::string arch = "llama";   // "llama", or "qwen2": LLaMA with attention_bias (core/model/qwen2)

  int head_dim() const { return d_model / n_head; }
  int kv_dim() const { return n_kv_head * head_dim(); }
  int padded_vocab() const { return (vocab + 63) / 64 * 64; }  // as GPT-2: faster head GEMMs
  std::int64_t parameter_count() const;
  ModelInfo info() const {
    return {arch, n_layer,    n_head,         n_kv_head, d_model,       vocab, seq_len, parameter_count(),
            d_ff, head_dim(), padded_vocab(), 0,         tie_embeddings};
  }
  // Empty when valid; otherwise what is wrong, naming the key.
  std::string validate() const;
  // RoPE's head_dim / 2 inverse frequencies under rope_scaling, in f32 as Hugging Face computes
  // them; empty without scaling (the kernels then use theta^(-2i/head_dim) themselves).
  std::vector<float> rope_inverse_frequencies() const;
};

}  // namespace strata
