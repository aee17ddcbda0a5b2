#pragma once
// The Qwen2 family (qwen2_config.hpp): LLaMA's tensors and math, with q/k/v biases declared and
// trained. Checkpoints record arch = "qwen2"; a file with q_proj biases is a Qwen2 file.
#include "core/model/llama/llama_model.hpp"
#include "core/model/qwen2/qwen2_config.hpp"

namespace strata {

class Qwen2Model final : public LlamaModel {
 public:
  Qwen2Model(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options);
  std::string_view arch() const noexcept override { return "qwen2"; }
};

}  // namespace strata
