#include "kernels/cpu/matmul.hpp"

#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/bf16.hpp"
#include "strata/kernels_common.hpp"

namespace strata::cpu {

namespace {

// Rows of the stored (C, OC) weight per widened chunk.
std::int64_t chunk_rows(std::int64_t stored_rows, std::int64_t row_length, std::int64_t scratch_elements) {
  return std::clamp<std::int64_t>(scratch_elements / row_length, 1, stored_rows);
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
  if (rows == 1) {  // one position (decoding): a matrix-vector product, which sgemm runs far below speed
    cblas_sgemv(CblasRowMajor, transpose_weight ? CblasNoTrans : CblasTrans,
                static_cast<int>(transpose_weight ? out_features : in_features),
                static_cast<int>(transpose_weight ? in_features : out_features), 1.0f, weight,
                static_cast<int>(transpose_weight ? in_features : out_features), inp, 1, beta, out, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_weight ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(out_features), static_cast<int>(in_features), 1.0f, inp, static_cast<int>(in_features),
              weight, static_cast<int>(transpose_weight ? in_features : out_features), beta, out,
              static_cast<int>(out_features));
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t rows, std::int64_t in_features, std::int64_t out_features,
                     WeightLayout layout, GradientWrite dinp_write) {
  const int n = static_cast<int>(rows);
  const int c = static_cast<int>(in_features);
  const int oc = static_cast<int>(out_features);
  if (dinp != nullptr) {
    // dinp (N,C) (+)= dout (N,OC) @ W^T, where W^T is (OC,C)
    const float beta = dinp_write == GradientWrite::accumulate ? 1.0f : 0.0f;
    if (layout == WeightLayout::in_out) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, c, oc, 1.0f, dout, oc, weight, oc, beta, dinp, c);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, c, oc, 1.0f, dout, oc, weight, c, beta, dinp, c);
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
  if (dbias != nullptr) kernels::bias_backward(dbias, dout, rows, out_features);
}

void matmul_forward_bf16(float* out, const float* inp, const std::uint16_t* weight, const float* bias,
                         std::int64_t rows, std::int64_t in_features, std::int64_t out_features, WeightLayout layout,
                         float* scratch, std::int64_t scratch_elements) {
  const int n = static_cast<int>(rows);
  const int c = static_cast<int>(in_features);
  const int oc = static_cast<int>(out_features);
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < rows; ++row) std::copy(bias, bias + out_features, out + row * out_features);
  }
  if (layout == WeightLayout::in_out) {
    // out (N,OC) = sum over input chunks k of inp[:, k] (N,kc) @ W[k, :] (kc,OC)
    const std::int64_t step = chunk_rows(in_features, out_features, scratch_elements);
    for (std::int64_t k0 = 0; k0 < in_features; k0 += step) {
      const int kc = static_cast<int>(std::min(step, in_features - k0));
      widen(scratch, weight + k0 * out_features, kc * out_features);
      const float beta = (k0 == 0 && bias == nullptr) ? 0.0f : 1.0f;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, oc, kc, 1.0f, inp + k0, c, scratch, oc, beta, out, oc);
    }
    return;
  }
  // out[:, o] (N,oc) = inp (N,C) @ W[o, :]^T (C,oc): each chunk of output features its own columns
  const std::int64_t step = chunk_rows(out_features, in_features, scratch_elements);
  const float beta = bias == nullptr ? 0.0f : 1.0f;
  for (std::int64_t o0 = 0; o0 < out_features; o0 += step) {
    const int width = static_cast<int>(std::min(step, out_features - o0));
    widen(scratch, weight + o0 * in_features, width * in_features);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, width, c, 1.0f, inp, c, scratch, c, beta, out + o0, oc);
  }
}

void matmul_backward_bf16(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const std::uint16_t* weight, std::int64_t rows, std::int64_t in_features,
                          std::int64_t out_features, WeightLayout layout, float* scratch, std::int64_t scratch_elements,
                          GradientWrite dinp_write) {
  if (dinp != nullptr) {
    const int n = static_cast<int>(rows);
    const int c = static_cast<int>(in_features);
    const int oc = static_cast<int>(out_features);
    const float beta = dinp_write == GradientWrite::accumulate ? 1.0f : 0.0f;
    if (layout == WeightLayout::in_out) {
      // dinp[:, k] (N,kc) (+)= dout (N,OC) @ W[k, :]^T (OC,kc): each chunk writes its own columns
      const std::int64_t step = chunk_rows(in_features, out_features, scratch_elements);
      for (std::int64_t k0 = 0; k0 < in_features; k0 += step) {
        const int kc = static_cast<int>(std::min(step, in_features - k0));
        widen(scratch, weight + k0 * out_features, kc * out_features);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, kc, oc, 1.0f, dout, oc, scratch, oc, beta, dinp + k0,
                    c);
      }
    } else {
      // dinp (N,C) (+)= sum over output chunks o of dout[:, o] (N,oc) @ W[o, :] (oc,C)
      const std::int64_t step = chunk_rows(out_features, in_features, scratch_elements);
      for (std::int64_t o0 = 0; o0 < out_features; o0 += step) {
        const int width = static_cast<int>(std::min(step, out_features - o0));
        widen(scratch, weight + o0 * in_features, width * in_features);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, c, width, 1.0f, dout + o0, oc, scratch, c,
                    o0 == 0 ? beta : 1.0f, dinp, c);
      }
    }
  }
  // The weight and bias gradients do not read the weight: the f32 path computes them.
  matmul_backward(nullptr, dweight, dbias, dout, inp, nullptr, rows, in_features, out_features, layout);
}

}  // namespace strata::cpu
