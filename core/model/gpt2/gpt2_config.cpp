#include "core/model/gpt2/gpt2_config.hpp"

namespace strata {

GPT2Config gpt2_config(const ModelShape& shape) {
  return {shape.n_layer, shape.n_head, shape.d_model, shape.vocab, shape.seq_len};
}

ModelShape gpt2_shape(const GPT2Config& config) {
  ModelShape shape;
  shape.n_layer = config.n_layer;
  shape.n_head = config.n_head;
  shape.n_kv_head = config.n_head;
  shape.d_model = config.d_model;
  shape.d_ff = 4 * config.d_model;
  shape.vocab = config.vocab;
  shape.seq_len = config.seq_len;
  shape.norm_eps = 1e-5;
  shape.tie_embeddings = true;
  return shape;
}

std::vector<AdapterTarget> gpt2_adapter_targets(const GPT2Config& config) {
  const std::int64_t C = config.d_model;
  return {{"qkv", "attn.c_attn.weight", {0, C, 3 * C, WeightLayout::in_out}},
          {"attn_proj", "attn.c_proj.weight", {0, C, C, WeightLayout::in_out}},
          {"fc", "mlp.c_fc.weight", {0, C, 4 * C, WeightLayout::in_out}},
          {"fc_proj", "mlp.c_proj.weight", {0, 4 * C, C, WeightLayout::in_out}}};
}

std::string GPT2Config::validate() const {
  if (n_layer < 1) return "model.n_layer must be >= 1";
  if (n_head < 1) return "model.n_head must be >= 1";
  if (d_model < 1) return "model.d_model must be >= 1";
  if (d_model % n_head != 0)
    return "model.n_head = " + std::to_string(n_head) + " must divide model.d_model = " + std::to_string(d_model);
  // Token files store uint32 ids (version 2), so the token format no longer caps vocab at 65536.
  if (vocab < 2 || vocab > kMaxVocab) return "model.vocab must be in [2, " + std::to_string(kMaxVocab) + "]";
  if (seq_len < 1) return "model.seq_len must be >= 1";
  return {};
}

}  // namespace strata
