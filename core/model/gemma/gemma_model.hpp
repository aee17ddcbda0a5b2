#pragma once
// The Gemma family (first generation; gemma_family.cpp), following Hugging Face's modeling_gemma:
// LLaMA's tensors and blocks (core/model/llama/) with four differences, each an option of LLaMA's
// math (LlamaMath): every RMSNorm's gain is 1 + w (the file stores w; a new model's w is 0); the
// embedding's rows are scaled by sqrt(d_model), rounded to f32 as HF rounds its normalizer; the MLP
// is GeGLU, gelu_tanh(gate) * up; and the head is always the tied embedding. A head's width is
// config.json's head_dim (ModelShape::own_head_dim: Gemma 7B's 16 heads are 256 wide over a d_model
// of 3072), so q_proj is (n_head * head_dim, d_model) and o_proj its transpose.
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/model/llama/llama_model.hpp"

namespace strata {

class GemmaModel final : public LlamaModel {
 public:
  GemmaModel(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options)
      : LlamaModel(config, backend, attention, options, math(config)) {
    if (!ops().supports(Op::geglu_forward) || !ops().supports(Op::geglu_backward))
      throw std::invalid_argument("arch = \"gemma\": the " + std::string(ops().backend()) +
                                  " backend has no geglu op, which Gemma's MLP needs");
  }
  std::string_view arch() const noexcept override { return "gemma"; }

 private:
  static LlamaMath math(const LlamaConfig& config) {
    return {1.0f, static_cast<float>(std::sqrt(static_cast<double>(config.d_model))), true};
  }
};

}  // namespace strata
