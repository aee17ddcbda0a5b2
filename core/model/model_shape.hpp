#pragma once
// A model's shape, one struct for every family: what [model], config.json and the checkpoint's
// model describe. A family reads the fields it has and leaves the others at their defaults (GPT-2:
// n_layer, n_head, d_model, vocab and seq_len; its MLP is 4 d_model wide and its head tied by its
// definition); its descriptor (core/model/model_family.hpp) says what the rest mean for it.
#include <cstdint>

namespace strata {

// The largest model.vocab: token files hold uint32 ids, and the LM head padded to a multiple of
// 64 rows (padded_vocab) must still fit in an int, so 2^31 - 64 rather than 2^31 - 1.
inline constexpr int kMaxVocab = 2147483647 - 63;

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

// As Hugging Face's LlamaConfig names them: hidden_size = d_model, intermediate_size = d_ff,
// num_key_value_heads = n_kv_head, max_position_embeddings bounds seq_len.
struct ModelShape {
  int n_layer = 12;
  int n_head = 12;
  int n_kv_head = 12;
  int d_model = 768;
  int d_ff = 2048;
  int vocab = 32000;
  int seq_len = 1024;  // the longest sequence trained on
  double rope_theta = 10000.0;
  RopeScaling rope_scaling = {};
  double norm_eps = 1e-6;
  bool tie_embeddings = false;
  bool attention_bias = false;  // q, k and v projections with biases (HF's attention_bias; Qwen2)
  // Each position attends to itself and the sliding_window - 1 positions before it (HF's
  // sliding_window; Mistral); 0: to every earlier position.
  int sliding_window = 0;
  // A head's width when the family sets its own (HF's head_dim; Gemma 7B: 16 heads of 256 over a
  // d_model of 3072); 0: d_model / n_head.
  int own_head_dim = 0;

  int head_dim() const { return own_head_dim > 0 ? own_head_dim : d_model / n_head; }
  int q_dim() const { return n_head * head_dim(); }  // the queries' and the attention output's width
  int kv_dim() const { return n_kv_head * head_dim(); }
  // The LM head's rows are padded to a multiple of 64 for faster GEMMs; padded logits are masked
  // out of the loss and never stored in checkpoints.
  int padded_vocab() const { return (vocab + 63) / 64 * 64; }
};

}  // namespace strata
