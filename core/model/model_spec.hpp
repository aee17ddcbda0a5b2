#pragma once
// The manifest's [model] table: which family, and its shape (make_model.hpp builds the Model).
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/model/adapter_targets.hpp"
#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/llama/llama_config.hpp"
#include "strata/ops.hpp"

namespace strata {

struct ModelSpec {
  // A Hugging Face model directory ([model] from): its config.json gave the keys below, and its
  // weights are the run's starting weights (core/checkpoint/hf_directory.hpp).
  std::optional<std::filesystem::path> from;
  std::string arch = "gpt2";  // "gpt2" | "llama" | "qwen2"
  GPT2Config gpt2;            // when arch = "gpt2"
  LlamaConfig llama;          // when arch = "llama" or "qwen2" (LLaMA with q/k/v biases)

  // LLaMA's shape and blocks: llama or qwen2.
  bool is_llama() const noexcept { return arch == "llama" || arch == "qwen2"; }
  int n_layer() const noexcept { return is_llama() ? llama.n_layer : gpt2.n_layer; }
  int vocab() const noexcept { return is_llama() ? llama.vocab : gpt2.vocab; }
  int seq_len() const noexcept { return is_llama() ? llama.seq_len : gpt2.seq_len; }
  ModelInfo info() const { return is_llama() ? llama.info() : gpt2.info(); }
  std::int64_t parameter_count() const { return is_llama() ? llama.parameter_count() : gpt2.parameter_count(); }
  // The distinct shapes of a block's weight matrices (in/out features and layout, rows unused), each
  // with a name to report: what quantized storage must fit, checked before the model is built.
  std::vector<std::pair<std::string, MatmulShape>> block_matrices() const {
    if (is_llama()) {
      const std::int64_t C = llama.d_model, KV = llama.kv_dim(), F = llama.d_ff;
      return {{"self_attn.q_proj.weight", {0, C, C, WeightLayout::out_in}},
              {"self_attn.k_proj.weight", {0, C, KV, WeightLayout::out_in}},
              {"mlp.gate_proj.weight", {0, C, F, WeightLayout::out_in}},
              {"mlp.down_proj.weight", {0, F, C, WeightLayout::out_in}}};
    }
    const std::int64_t C = gpt2.d_model;
    return {{"attn.c_attn.weight", {0, C, 3 * C, WeightLayout::in_out}},
            {"attn.c_proj.weight", {0, C, C, WeightLayout::in_out}},
            {"mlp.c_fc.weight", {0, C, 4 * C, WeightLayout::in_out}},
            {"mlp.c_proj.weight", {0, 4 * C, C, WeightLayout::in_out}}};
  }
  // The matrices a matmul adapter may target (LoRA's `targets`).
  std::vector<AdapterTarget> adapter_targets() const {
    return is_llama() ? llama_adapter_targets(llama) : gpt2_adapter_targets(gpt2);
  }
  AttentionShape attention_shape(int batch) const {
    if (is_llama()) return {batch, llama.seq_len, llama.n_head, llama.n_kv_head, llama.head_dim()};
    return {batch, gpt2.seq_len, gpt2.n_head, gpt2.n_head, gpt2.n_head > 0 ? gpt2.d_model / gpt2.n_head : 0};
  }
};

}  // namespace strata
