#include "core/planner/dry_plugins.hpp"

namespace strata {

// A plugin's products are priced as the backend's own (the calibration measures the op table).
Status DryKernel::attention_forward(const AttentionShape& shape, float*, float*, const AttentionInputs&) {
  backend_.record("attention_forward", attention_flops(shape));
  return {};
}

Status DryKernel::attention_backward(const AttentionShape& shape, const AttentionGrads&, const float*, const float*,
                                     const AttentionInputs&, const float*, float*) {
  backend_.record("attention_backward", attention_flops(shape));
  return {};
}

void DryQuantizer::quantize(QuantizedMatrix, const float*, const MatmulShape& shape) noexcept {
  backend_.record("narrow", static_cast<double>(shape.in_features) * static_cast<double>(shape.out_features));
}

void DryQuantizer::matmul_forward(float*, const float*, Weight, const float*, const MatmulShape& shape,
                                  Scratch) noexcept {
  backend_.record("matmul_forward_bf16", 2.0 * static_cast<double>(shape.rows) *
                                             static_cast<double>(shape.in_features) *
                                             static_cast<double>(shape.out_features));
}

void DryQuantizer::matmul_backward(float* dinp, float* dweight, float*, const float*, const float*, Weight,
                                   const MatmulShape& shape, Scratch, GradientWrite) noexcept {
  backend_.record("matmul_backward_bf16", 2.0 * static_cast<double>(shape.rows) *
                                              static_cast<double>(shape.in_features) *
                                              static_cast<double>(shape.out_features) *
                                              ((dinp != nullptr ? 1.0 : 0.0) + (dweight != nullptr ? 1.0 : 0.0)));
}

}  // namespace strata
