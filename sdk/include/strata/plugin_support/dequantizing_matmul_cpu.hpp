#pragma once
// The two matmuls of a quantized weight on the CPU, for any storage format: the weight is
// dequantized a few whole stored rows at a time into `scratch` (at least one stored row, at most
// `scratch_elements` floats, rounded down to whole rows) and multiplied with OpenBLAS's sgemm, so no
// f32 copy of the matrix exists. The format is the caller's `dequantize_rows(out, first_row,
// row_count)`: stored rows [first_row, first_row + row_count) as f32, row-major. The int8 and nf4
// plugins share these; a plugin that includes this header links OpenBLAS.
//
// Layouts as strata/ops.hpp: in_out is stored (in_features, out_features), out_in is stored
// (out_features, in_features). inp is (N, C), out is (N, OC), out = inp @ W + bias (in_out) or
// inp @ W^T + bias (out_in). Backward overwrites or adds into dinp as told, adds into dweight (f32,
// the stored layout: the gradient of the master copy) and dbias (column sums of dout); any of the
// three may be null, and dweight and dbias do not read the weight. The products are OpenBLAS's
// threaded sgemm, as on the built-in f32 path, whose last bits follow the thread count.
#include <cblas.h>

#include <algorithm>
#include <cstdint>

#include "strata/kernels_common.hpp"
#include "strata/ops.hpp"

namespace strata::plugin_support {

// The matrix as stored: in_out keeps input features as rows, out_in output features.
struct StoredShape {
  std::int64_t rows;
  std::int64_t row_length;
};

inline StoredShape stored_shape(std::int64_t in_features, std::int64_t out_features, WeightLayout layout) {
  return layout == WeightLayout::in_out ? StoredShape{in_features, out_features}
                                        : StoredShape{out_features, in_features};
}

// Stored rows per dequantized chunk: as many whole rows as the scratch holds, at least one.
inline std::int64_t chunk_rows(StoredShape stored, std::int64_t scratch_elements) {
  return std::clamp<std::int64_t>(scratch_elements / stored.row_length, 1, stored.rows);
}

template <class DequantizeRows>
void dequantizing_matmul_forward(float* out, const float* inp, const float* bias, const MatmulShape& shape,
                                 float* scratch, std::int64_t scratch_elements, DequantizeRows&& dequantize_rows) {
  const int n = static_cast<int>(shape.rows);
  const int c = static_cast<int>(shape.in_features);
  const int oc = static_cast<int>(shape.out_features);
  const StoredShape stored = stored_shape(shape.in_features, shape.out_features, shape.layout);
  const std::int64_t step = chunk_rows(stored, scratch_elements);
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < shape.rows; ++row)
      std::copy(bias, bias + shape.out_features, out + row * shape.out_features);
  }
  if (shape.layout == WeightLayout::in_out) {
    // out (N,OC) = sum over input chunks k of inp[:, k] (N,kc) @ W[k, :] (kc,OC)
    for (std::int64_t k0 = 0; k0 < shape.in_features; k0 += step) {
      const std::int64_t kc = std::min(step, shape.in_features - k0);
      dequantize_rows(scratch, k0, kc);
      const float beta = (k0 == 0 && bias == nullptr) ? 0.0f : 1.0f;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, oc, static_cast<int>(kc), 1.0f, inp + k0, c, scratch,
                  oc, beta, out, oc);
    }
    return;
  }
  // out[:, o] (N,oc) = inp (N,C) @ W[o, :]^T (C,oc): each chunk of output features its own columns
  const float beta = bias == nullptr ? 0.0f : 1.0f;
  for (std::int64_t o0 = 0; o0 < shape.out_features; o0 += step) {
    const std::int64_t width = std::min(step, shape.out_features - o0);
    dequantize_rows(scratch, o0, width);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, static_cast<int>(width), c, 1.0f, inp, c, scratch, c, beta,
                out + o0, oc);
  }
}

template <class DequantizeRows>
void dequantizing_matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                                  const MatmulShape& shape, float* scratch, std::int64_t scratch_elements,
                                  GradientWrite dinp_write, DequantizeRows&& dequantize_rows) {
  const int n = static_cast<int>(shape.rows);
  const int c = static_cast<int>(shape.in_features);
  const int oc = static_cast<int>(shape.out_features);
  if (dinp != nullptr) {
    const StoredShape stored = stored_shape(shape.in_features, shape.out_features, shape.layout);
    const std::int64_t step = chunk_rows(stored, scratch_elements);
    const float beta = dinp_write == GradientWrite::accumulate ? 1.0f : 0.0f;
    if (shape.layout == WeightLayout::in_out) {
      // dinp[:, k] (N,kc) (+)= dout (N,OC) @ W[k, :]^T (OC,kc): each chunk writes its own columns
      for (std::int64_t k0 = 0; k0 < shape.in_features; k0 += step) {
        const std::int64_t kc = std::min(step, shape.in_features - k0);
        dequantize_rows(scratch, k0, kc);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, static_cast<int>(kc), oc, 1.0f, dout, oc, scratch, oc,
                    beta, dinp + k0, c);
      }
    } else {
      // dinp (N,C) (+)= sum over output chunks o of dout[:, o] (N,oc) @ W[o, :] (oc,C)
      for (std::int64_t o0 = 0; o0 < shape.out_features; o0 += step) {
        const std::int64_t width = std::min(step, shape.out_features - o0);
        dequantize_rows(scratch, o0, width);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, c, static_cast<int>(width), 1.0f, dout + o0, oc,
                    scratch, c, o0 == 0 ? beta : 1.0f, dinp, c);
      }
    }
  }
  // The weight and bias gradients do not read the weight: the products of the f32 path.
  if (dweight != nullptr) {
    if (shape.layout == WeightLayout::in_out) {
      // dW (C,OC) += inp^T (C,N) @ dout (N,OC)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, oc, n, 1.0f, inp, c, dout, oc, 1.0f, dweight, oc);
    } else {
      // dW (OC,C) += dout^T (OC,N) @ inp (N,C)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, oc, c, n, 1.0f, dout, oc, inp, c, 1.0f, dweight, c);
    }
  }
  if (dbias != nullptr) kernels::bias_backward(dbias, dout, shape.rows, shape.out_features);
}

}  // namespace strata::plugin_support
