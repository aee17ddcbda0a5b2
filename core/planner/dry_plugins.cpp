#include "core/planner/dry_plugins.hpp"

namespace strata {

Status DryKernel::attention_forward(const AttentionShape&, float*, float*, const AttentionInputs&) {
  backend_.record("attention_forward");
  return {};
}

Status DryKernel::attention_backward(const AttentionShape&, const AttentionGrads&, const float*, const float*,
                                     const AttentionInputs&, const float*, float*) {
  backend_.record("attention_backward");
  return {};
}

void DryQuantizer::quantize(QuantizedMatrix, const float*, const MatmulShape&) noexcept {
  backend_.record("quantize");
}

void DryQuantizer::matmul_forward(float*, const float*, Weight, const float*, const MatmulShape&, Scratch) noexcept {
  backend_.record("matmul_forward");
}

void DryQuantizer::matmul_backward(float*, float*, float*, const float*, const float*, Weight, const MatmulShape&,
                                   Scratch, GradientWrite) noexcept {
  backend_.record("matmul_backward");
}

}  // namespace strata
