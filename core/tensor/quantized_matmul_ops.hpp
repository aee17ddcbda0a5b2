#pragma once
// The op table a model computes with when its matrices are stored quantized: the backend's own ops,
// except that a matmul whose weight has the quantizer's dtype runs the weight quantizer's kernel
// (an op override per dtype: docs/architecture.md, "Op overrides"). No built-in backend reads
// quantized weights.
#include "strata/forwarding_ops.hpp"
#include "strata/weight_quantizer.hpp"

namespace strata {

class QuantizedMatmulOps final : public ForwardingOps {
 public:
  QuantizedMatmulOps(Ops& base, WeightQuantizer& quantizer) : ForwardingOps(base), quantizer_(quantizer) {}

  void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                      Scratch scratch) noexcept override {
    if (weight.dtype == quantizer_.dtype())
      quantizer_.matmul_forward(out, inp, weight, bias, shape, scratch);
    else
      base().matmul_forward(out, inp, weight, bias, shape, scratch);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, Weight weight,
                       const MatmulShape& shape, Scratch scratch, GradientWrite dinp_write) noexcept override {
    if (weight.dtype == quantizer_.dtype())
      quantizer_.matmul_backward(dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write);
    else
      base().matmul_backward(dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write);
  }

 private:
  WeightQuantizer& quantizer_;
};

}  // namespace strata
