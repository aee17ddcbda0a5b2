#pragma once
// The Mistral family (mistral_family.cpp): LLaMA's tensors and math with a sliding attention window
// (ModelShape::sliding_window: each position attends to itself and the window - 1 before it), which
// the attention kernels and the decoding cache apply. Checkpoints record arch = "mistral"; its
// files hold LLaMA's names, so a LLaMA file loads into a Mistral model and the window comes from
// the manifest (or config.json).
#include "core/model/llama/llama_model.hpp"

namespace strata {

class MistralModel final : public LlamaModel {
 public:
  MistralModel(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options)
      : LlamaModel(config, backend, attention, options) {}
  std::string_view arch() const noexcept override { return "mistral"; }
};

}  // namespace strata
