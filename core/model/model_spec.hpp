#pragma once
// The manifest's [model] table: which family, and its shape (make_model.hpp builds the Model).
#include <string>

#include "core/model/gpt2/gpt2_config.hpp"
#include "core/model/llama/llama_config.hpp"

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
};

}  // namespace strata
