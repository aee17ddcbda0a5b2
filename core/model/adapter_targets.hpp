#pragma once
// The block matrices a matmul adapter (LoRA) may target, per family, by the names users write in
// `targets`: GPT-2's qkv, attn_proj, fc and fc_proj; LLaMA's q, k, v, o, gate, up and down. Each
// names its parameter within a block and its matmul shape (rows unused).
#include <string>
#include <vector>

#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/llama/llama_config.hpp"
#include "strata/ops.hpp"

namespace strata {

struct AdapterTarget {
  std::string target;  // "qkv"
  std::string matrix;  // the block's parameter, "attn.c_attn.weight"
  MatmulShape shape;
};

inline std::vector<AdapterTarget> gpt2_adapter_targets(const GPT2Config& config) {
  const std::int64_t C = config.d_model;
  return {{"qkv", "attn.c_attn.weight", {0, C, 3 * C, WeightLayout::in_out}},
          {"attn_proj", "attn.c_proj.weight", {0, C, C, WeightLayout::in_out}},
          {"fc", "mlp.c_fc.weight", {0, C, 4 * C, WeightLayout::in_out}},
          {"fc_proj", "mlp.c_proj.weight", {0, 4 * C, C, WeightLayout::in_out}}};
}

inline std::vector<AdapterTarget> llama_adapter_targets(const LlamaConfig& config) {
  const std::int64_t C = config.d_model, KV = config.kv_dim(), F = config.d_ff;
  return {{"q", "self_attn.q_proj.weight", {0, C, C, WeightLayout::out_in}},
          {"k", "self_attn.k_proj.weight", {0, C, KV, WeightLayout::out_in}},
          {"v", "self_attn.v_proj.weight", {0, C, KV, WeightLayout::out_in}},
          {"o", "self_attn.o_proj.weight", {0, C, C, WeightLayout::out_in}},
          {"gate", "mlp.gate_proj.weight", {0, C, F, WeightLayout::out_in}},
          {"up", "mlp.up_proj.weight", {0, C, F, WeightLayout::out_in}},
          {"down", "mlp.down_proj.weight", {0, F, C, WeightLayout::out_in}}};
}

}  // namespace strata
