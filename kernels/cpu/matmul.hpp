#pragma once
// Matmul with bias, forward and backward.
//   in_out layout (HF Conv1D, GPT-2's projections): weight is (C, OC); out = inp @ weight + bias
//   out_in layout (nn.Linear: LLaMA, the LM head):   weight is (OC, C); out = inp @ weight^T + bias
// inp is (N, C), out is (N, OC). Backward accumulates into dweight and dbias, and into dinp unless
// told to overwrite it (any of the three may be null).
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::cpu {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, std::int64_t rows,
                    std::int64_t in_features, std::int64_t out_features, WeightLayout layout);
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t rows, std::int64_t in_features, std::int64_t out_features,
                     WeightLayout layout, GradientWrite dinp_write = GradientWrite::accumulate);

// The same products with a bf16-stored weight, for bf16 weight storage with f32 compute. The
// weight is widened to f32 a few whole stored rows at a time into `scratch` (at least one row, at
// most `scratch_elements` floats), so no f32 copy of the matrix exists at once: with in_out a
// stored row is an input feature (the chunks sum into out), with out_in an output feature (each
// chunk writes its own columns of out). The weight and bias gradients do not read the weight.
void matmul_forward_bf16(float* out, const float* inp, const std::uint16_t* weight, const float* bias,
                         std::int64_t rows, std::int64_t in_features, std::int64_t out_features, WeightLayout layout,
                         float* scratch, std::int64_t scratch_elements);
void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const std::uint16_t* weight, std::int64_t rows, std::int64_t in_features,
                          std::int64_t out_features, WeightLayout layout, float* scratch, std::int64_t scratch_elements,
                          GradientWrite dinp_write = GradientWrite::accumulate);

namespace reference {

template <typename Real>
Real weight_at(const Real* weight, std::int64_t c, std::int64_t o, std::int64_t in_features, std::int64_t out_features,
               WeightLayout layout) {
  return layout == WeightLayout::in_out ? weight[c * out_features + o] : weight[o * in_features + c];
}

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, const Real* bias, std::int64_t rows,
                    std::int64_t in_features, std::int64_t out_features, WeightLayout layout) {
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t o = 0; o < out_features; ++o) {
      Real sum = bias != nullptr ? bias[o] : Real(0);
      for (std::int64_t c = 0; c < in_features; ++c)
        sum += inp[n * in_features + c] * weight_at(weight, c, o, in_features, out_features, layout);
      out[n * out_features + o] = sum;
    }
  }
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp, const Real* weight,
                     std::int64_t rows, std::int64_t in_features, std::int64_t out_features, WeightLayout layout) {
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t o = 0; o < out_features; ++o) {
      const Real d = dout[n * out_features + o];
      if (dbias != nullptr) dbias[o] += d;
      for (std::int64_t c = 0; c < in_features; ++c) {
        if (dinp != nullptr)
          dinp[n * in_features + c] += d * weight_at(weight, c, o, in_features, out_features, layout);
        if (dweight != nullptr) {
          const std::int64_t index = layout == WeightLayout::in_out ? c * out_features + o : o * in_features + c;
          dweight[index] += d * inp[n * in_features + c];
        }
      }
    }
  }
}

}  // namespace reference
}  // namespace strata::cpu
