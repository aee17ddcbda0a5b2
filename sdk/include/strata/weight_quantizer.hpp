#pragma once
// Quantized weight storage (an op override per dtype: docs/architecture.md, "Op overrides"): the
// mechanism a precision plugin brings when it stores the blocks' matrices in a dtype of its own
// (i8, f16). The host keeps the rows — a matrix's values in dtype() and its f32 scales if any,
// beside the f32 master copy the optimizer updates — and the model calls its matmuls as usual;
// every matmul whose weight has dtype() comes here instead of the backend's op, and after each
// update the host asks quantize() to turn the master into the stored form. Pointers are the memory
// of the backend the quantizer is bound to.
#include <cstdint>

#include "strata/kernel.hpp"
#include "strata/ops.hpp"
#include "strata/status.hpp"

namespace strata {

// A quantized matrix the quantizer writes: values of its dtype() and f32 scales (null when
// scale_groups() gave 0 scales), in the layout of the matmul shape it comes with (strata/ops.hpp);
// group_size as scale_groups() chose.
struct QuantizedMatrix {
  void* values = nullptr;
  float* scales = nullptr;
  std::int64_t group_size = 0;
};

class WeightQuantizer {
 public:
  virtual ~WeightQuantizer() = default;
  virtual DType dtype() const noexcept = 0;  // DType::i8, DType::f16
  // How a matrix of `shape` (its in/out features and layout; rows unused) is stored: the group size
  // its scales cover and how many scales it has. An error names the key that cannot fit the matrix
  // ("block_size = 48 does not divide the rows of h.0.attn.c_attn.weight (2304 values)"); the host
  // refuses the manifest with it (exit 2).
  virtual Status scale_groups(const MatmulShape& shape, std::int64_t& group_size, std::int64_t& scales) const = 0;
  // The f32 working memory (floats) its matmuls would like for a product of `shape` (rows = the
  // model's input rows): the model's weight scratch covers at least one whole matrix and is raised
  // to this, up to 2^20 floats. Kernels work in whatever they are given; more means fewer passes.
  virtual std::int64_t scratch_floats(const MatmulShape& /*shape*/) const noexcept { return 0; }
  // Whether it runs on `target`, and binding to it: as Kernel::check and Kernel::bind.
  virtual Status check(const KernelTarget& target) const = 0;
  virtual Status bind(const KernelTarget& /*target*/) { return {}; }

  // The stored form of an f32 matrix (the optimizer's master copy), written into `out`.
  virtual void quantize(QuantizedMatrix out, const float* master, const MatmulShape& shape) noexcept = 0;
  // The op table's two matmuls (same contract as Ops::matmul_forward / matmul_backward) for a weight
  // of dtype(): weight.scales and weight.group_size describe its scales. dweight is f32 in the
  // weight's layout (the master's gradient).
  virtual void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                              Scratch scratch) noexcept = 0;
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                               Weight weight, const MatmulShape& shape, Scratch scratch,
                               GradientWrite dinp_write) noexcept = 0;
};

}  // namespace strata
