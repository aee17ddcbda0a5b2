#pragma once
// The op table a model computes with when its matrices are stored quantized: the backend's own ops,
// except that a matmul whose weight has the quantizer's dtype runs the weight quantizer's kernel
// (an op override per dtype: docs/architecture.md, "Op overrides"). No built-in backend reads
// quantized weights.
#include <string>
#include <utility>

#include "core/util/plugin_crash_report.hpp"
#include "strata/forwarding_ops.hpp"
#include "strata/weight_quantizer.hpp"

namespace strata {

class QuantizedMatmulOps final : public ForwardingOps {
 public:
  // `label` names the quantizer if its kernels crash (core/util/plugin_crash_report.hpp).
  QuantizedMatmulOps(Ops& base, WeightQuantizer& quantizer, std::string label)
      : ForwardingOps(base), quantizer_(quantizer), label_(std::move(label)) {}

  using Ops::run;
  void run(Op id, void* record) noexcept override {
    if (id == Op::matmul_forward) {
      const auto& call = record_of<op::MatmulForward>(record);
      if (call.weight.dtype == quantizer_.dtype()) {
        const PluginCallScope scope(label_, "matmul_forward", -1, 0);
        return quantizer_.matmul_forward(call);
      }
    } else if (id == Op::matmul_backward) {
      const auto& call = record_of<op::MatmulBackward>(record);
      if (call.weight.dtype == quantizer_.dtype()) {
        const PluginCallScope scope(label_, "matmul_backward", -1, 0);
        return quantizer_.matmul_backward(call);
      }
    }
    ForwardingOps::run(id, record);
  }

 private:
  WeightQuantizer& quantizer_;
  std::string label_;
};

}  // namespace strata
