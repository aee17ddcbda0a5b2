#pragma once
// Quantized weight storage (an op override per dtype: docs/architecture.md, "Op overrides"): the
// mechanism a precision plugin brings when it stores the blocks' matrices in a dtype of its own
// (i8, f16, u4 codes). The host keeps the rows — a matrix's values in dtype() and its side data
// (scales, in whatever format the quantizer declares in layout()), beside the f32 master copy the
// optimizer updates — and the model calls its matmuls as usual; every matmul whose weight has
// dtype() comes here instead of the backend's op, and after each update the host asks quantize() to
// turn the master into the stored form. Pointers are the memory of the backend the quantizer is
// bound to.
#include <cstdint>

#include "strata/kernel.hpp"
#include "strata/ops.hpp"
#include "strata/status.hpp"

namespace strata {

// How one matrix is stored: its values in dtype() (storage_bytes of its in x out elements) and
// `side_bytes` bytes of side data beside them (0: none), which the quantizer alone reads (int8: one
// f32 scale per group of group_size values; NF4: 8-bit absmax codes and their own scales).
// group_size comes back to the quantizer in Weight::group_size.
struct QuantizedLayout {
  std::int64_t group_size = 0;
  std::uint64_t side_bytes = 0;
};

// A quantized matrix the quantizer writes: values of its dtype() and its side data (null when the
// layout has none), in the layout of the matmul shape it comes with; group_size as layout() chose.
struct QuantizedMatrix {
  void* values = nullptr;
  void* scales = nullptr;
  std::int64_t group_size = 0;
};

class WeightQuantizer {
 public:
  virtual ~WeightQuantizer() = default;
  virtual DType dtype() const noexcept = 0;  // DType::i8, DType::f16
  // How a matrix of `shape` (its in/out features and layout; rows unused) is stored. An error names
  // the key that cannot fit the matrix ("block_size = 48 does not divide the rows of
  // h.0.attn.c_attn.weight (2304 values)"); the host refuses the manifest with it (exit 2).
  virtual Status layout(const MatmulShape& shape, QuantizedLayout& layout) const = 0;
  // The f32 working memory (floats) its matmuls would like for a product of `shape` (rows = the
  // model's input rows): the model's weight scratch covers at least one whole matrix and is raised
  // to this, up to 2^20 floats. Kernels work in whatever they are given; more means fewer passes.
  virtual std::int64_t scratch_floats(const MatmulShape& /*shape*/) const noexcept { return 0; }
  // Whether it runs on `target`, and binding to it: as Kernel::check and Kernel::bind.
  virtual Status check(const KernelTarget& target) const = 0;
  virtual Status bind(const KernelTarget& /*target*/) { return {}; }

  // The stored form of an f32 matrix (the optimizer's master copy), written into `out`.
  virtual void quantize(QuantizedMatrix out, const float* master, const MatmulShape& shape) noexcept = 0;
  // The op table's two matmuls (strata/op_records.hpp) for a weight of dtype(): weight.scales is its
  // side data and weight.group_size the layout's. dweight is f32 in the weight's layout (the master's
  // gradient).
  virtual void matmul_forward(const op::MatmulForward& call) noexcept = 0;
  virtual void matmul_backward(const op::MatmulBackward& call) noexcept = 0;
};

}  // namespace strata
