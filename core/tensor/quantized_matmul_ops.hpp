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

  using Ops::run;
  void run(Op id, void* record) noexcept override {
    if (id == Op::matmul_forward) {
      const auto& call = record_of<op::MatmulForward>(record);
      if (call.weight.dtype == quantizer_.dtype()) return quantizer_.matmul_forward(call);
    } else if (id == Op::matmul_backward) {
      const auto& call = record_of<op::MatmulBackward>(record);
      if (call.weight.dtype == quantizer_.dtype()) return quantizer_.matmul_backward(call);
    }
    ForwardingOps::run(id, record);
  }

 private:
  WeightQuantizer& quantizer_;
};

}  // namespace strata
