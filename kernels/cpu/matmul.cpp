#include "kernels/cpu/matmul.hpp"

#include <cblas.h>

#include <algorithm>

namespace strata::cpu {

namespace {

// dbias[o] += sum_n dout[n, o]. Parallel over column blocks, rows summed in order: the result does
// not depend on the thread count.
void bias_backward(float* dbias, const float* dout, std::int64_t rows, std::int64_t out_features) {
  constexpr std::int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (std::int64_t block_start = 0; block_start < out_features; block_start += kBlock) {
    const std::int64_t block_end = std::min(block_start + kBlock, out_features);
    for (std::int64_t n = 0; n < rows; ++n) {
      const float* row = dout + n * out_features;
#pragma omp simd
      for (std::int64_t o = block_start; o < block_end; ++o) dbias[o] += row[o];
    }
  }
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, std::int64_t rows,
                    std::int64_t in_features, std::int64_t out_features, WeightLayout layout) {
  float beta = 0.0f;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t n = 0; n < rows; ++n) std::copy(bias, bias + out_features, out + n * out_features);
    beta = 1.0f;
  }
  const bool transpose_weight = layout == WeightLayout::out_in;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_weight ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(out_features), static_cast<int>(in_features), 1.0f, inp, static_cast<int>(in_features),
              weight, static_cast<int>(transpose_weight ? in_features : out_features), beta, out,
              static_cast<int>(out_features));
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t rows, std::int64_t in_features, std::int64_t out_features,
                     WeightLayout layout) {
  const int n = static_cast<int>(rows);
  const int c = static_cast<int>(in_features);
  const int oc = static_cast<int>(out_features);
  if (dinp != nullptr) {
    // dinp (N,C) += dout (N,OC) @ W^T, where W^T is (OC,C)
    if (layout == WeightLayout::in_out) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, c, oc, 1.0f, dout, oc, weight, oc, 1.0f, dinp, c);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, c, oc, 1.0f, dout, oc, weight, c, 1.0f, dinp, c);
    }
  }
  if (dweight != nullptr) {
    if (layout == WeightLayout::in_out) {
      // dW (C,OC) += inp^T (C,N) @ dout (N,OC)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, oc, n, 1.0f, inp, c, dout, oc, 1.0f, dweight, oc);
    } else {
      // dW (OC,C) += dout^T (OC,N) @ inp (N,C)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, oc, c, n, 1.0f, dout, oc, inp, c, 1.0f, dweight, c);
    }
  }
  if (dbias != nullptr) bias_backward(dbias, dout, rows, out_features);
}

}  // namespace strata::cpu
