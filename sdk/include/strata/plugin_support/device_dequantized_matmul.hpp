#pragma once
// The two matmuls of a quantized weight on an accelerator, for any storage format: the plugin's
// `dequantize(weight, shape)` writes the whole matrix as bf16 into its workspace and gives it as a
// Weight (null data when the workspace could not be had, logged), and the backend's bf16 matmul
// runs on it. A product that cannot run reads NaN (fill_nan). The weight and bias gradients do not
// read the weight: without dinp nothing is dequantized. int8 and nf4 share these.
#include "strata/op_records.hpp"
#include "strata/ops.hpp"
#include "strata/plugin_support/device_workspace.hpp"

namespace strata::plugin_support {

template <class Dequantize>
void device_matmul_forward(Ops& ops, const op::MatmulForward& call, Dequantize&& dequantize) noexcept {
  const auto& [out, inp, weight, bias, shape, scratch] = call;
  if (const Weight dequantized = dequantize(weight, shape); dequantized.data != nullptr)
    ops.matmul_forward(out, inp, dequantized, bias, shape, {});
  else
    fill_nan(ops, out, shape.rows * shape.out_features);
}

template <class Dequantize>
void device_matmul_backward(Ops& ops, const op::MatmulBackward& call, Dequantize&& dequantize) noexcept {
  const auto& [dinp, dweight, dbias, dout, inp, weight, shape, scratch, dinp_write] = call;
  const Weight dequantized = dinp != nullptr ? dequantize(weight, shape) : Weight{nullptr, DType::bf16};
  if (dinp != nullptr && dequantized.data == nullptr) {
    fill_nan(ops, dinp, shape.rows * shape.in_features);
    return;
  }
  ops.matmul_backward(dinp, dweight, dbias, dout, inp, dequantized, shape, {}, dinp_write);
}

}  // namespace strata::plugin_support
