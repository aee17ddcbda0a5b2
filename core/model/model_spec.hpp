#pragma once
// The manifest's [model] table: which family, and its shape (make_model.hpp builds the Model).
#include <string>

#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/llama/llama_config.hpp"
#include "strata/ops.hpp"

namespace strata {

struct ModelSpec {
  std::string arch = "gpt2";  // "gpt2" | "llama"
  GPT2Config gpt2;            // when arch = "gpt2"
  LlamaConfig llama;          // when arch = "llama"

  bool is_llama() const noexcept { return arch == "llama"; }
  int n_layer() const noexcept { return is_llama() ? llama.n_layer : gpt2.n_layer; }
  int vocab() const noexcept { return is_llama() ? llama.vocab : gpt2.vocab; }
  int seq_len() const noexcept { return is_llama() ? llama.seq_len : gpt2.seq_len; }
  ModelInfo info() const { return is_llama() ? llama.info() : gpt2.info(); }
  std::int64_t parameter_count() const { return is_llama() ? llama.parameter_count() : gpt2.parameter_count(); }
  AttentionShape attention_shape(int batch) const {
    if (is_llama()) return {batch, llama.seq_len, llama.n_head, llama.n_kv_head, llama.head_dim()};
    return {batch, gpt2.seq_len, gpt2.n_head, gpt2.n_head, gpt2.n_head > 0 ? gpt2.d_model / gpt2.n_head : 0};
  }
};

}  // namespace strata
