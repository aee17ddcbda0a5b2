#include "core/model/llama/llama_config.hpp"

namespace strata {

std::int64_t LlamaConfig::parameter_count() const {
  const std::int64_t C = d_model, F = d_ff, KV = kv_dim();
  const std::int64_t biases = attention_bias ? C + 2 * KV : 0;
  const std::int64_t per_layer = 2 * C + C * C + 2 * KV * C + C * C + 3 * C * F + biases;
  const std::int64_t embeddings = static_cast<std::int64_t>(vocab) * C * (tie_embeddings ? 1 : 2);
  return embeddings + n_layer * per_layer + C;
}

std::string LlamaConfig::validate() const {
  if (n_layer < 1) return "model.n_layer must be >= 1";
  if (n_head < 1 || n_kv_head < 1) return "model.n_head and model.n_kv_head must be >= 1";
  if (d_model % n_head != 0)
    return "model.n_head = " + std::to_string(n_head) + " must divide model.d_model = " + std::to_string(d_model);
  if (n_head % n_kv_head != 0)
    return "model.n_kv_head = " + std::to_string(n_kv_head) + " must divide model.n_head = " + std::to_string(n_head) +
           " (each key/value head serves a whole group of query heads)";
  if (head_dim() % 2 != 0)
    return "model.d_model / model.n_head = " + std::to_string(head_dim()) +
           " is odd: RoPE rotates pairs, so the head dimension must be even";
  if (d_ff < 1) return "model.d_ff must be >= 1";
  if (vocab < 2) return "model.vocab must be >= 2";
  if (seq_len < 1) return "model.seq_len must be >= 1";
  if (!(rope_theta > 0.0)) return "model.rope_theta must be > 0";
  if (!(norm_eps > 0.0)) return "model.norm_eps must be > 0";
  return {};
}

}  // namespace strata
