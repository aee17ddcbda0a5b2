#pragma once
// The fast attention kernel as it was before grouped key/value heads (SDK 2), copied verbatim but
// for its shape type, so a test can show that today's kernel computes GPT-2's packed qkv bitwise
// as it did for sequences within one causal query tile (the kernel skips the masked triangle
// tile by tile since, which changes longer sequences in the last bits).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::cpu::test::legacy {

struct Shape {
  int batch = 0;
  int seq_len = 0;
  int d_model = 0;
  int n_head = 0;
};

// Fast path: one (batch, head) pair per task, the three products as single-threaded sgemm calls
// on strided views of qkv (OpenBLAS runs serially inside an OpenMP region), the softmax in between.
inline void attention_forward(float* out, float* att, const float* qkv, const Shape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, C = shape.d_model, NH = shape.n_head;
  const std::int64_t hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int row_stride = static_cast<int>(3 * C);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      const float* q = qkv + b * T * 3 * C + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* scores = att + (b * NH + h) * T * T;
      // scores (T,T) = scale * q (T,hs) @ k^T (hs,T); only the lower triangle is used.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(T),
                  static_cast<int>(hs), scale, q, row_stride, k, row_stride, 0.0f, scores, static_cast<int>(T));
      for (std::int64_t t = 0; t < T; ++t) {
        float* row = scores + t * T;
        float max_value = -std::numeric_limits<float>::infinity();
        for (std::int64_t t2 = 0; t2 <= t; ++t2) max_value = std::max(max_value, row[t2]);
        float sum = 0.0f;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          row[t2] = std::exp(row[t2] - max_value);
          sum += row[t2];
        }
        const float inverse_sum = 1.0f / sum;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) row[t2] *= inverse_sum;
        std::fill(row + t + 1, row + T, 0.0f);
      }
      // out (T,hs) = att (T,T) @ v (T,hs)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(hs),
                  static_cast<int>(T), 1.0f, scores, static_cast<int>(T), v, row_stride, 0.0f, out + b * T * C + h * hs,
                  static_cast<int>(C));
    }
}

inline void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att,
                               const Shape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, C = shape.d_model, NH = shape.n_head;
  const std::int64_t hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int row_stride = static_cast<int>(3 * C);
  const int t_int = static_cast<int>(T);
  const int hs_int = static_cast<int>(hs);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      const float* q = qkv + b * T * 3 * C + h * hs;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + b * T * 3 * C + h * hs;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* probabilities = att + (b * NH + h) * T * T;
      const float* dy = dout + b * T * C + h * hs;
      float* dscores = scratch + (b * NH + h) * T * T;
      // datt (T,T) = dy (T,hs) @ v^T ; dv (T,hs) += att^T (T,T) @ dy (T,hs)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t_int, t_int, hs_int, 1.0f, dy, static_cast<int>(C), v,
                  row_stride, 0.0f, dscores, t_int);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t_int, hs_int, t_int, 1.0f, probabilities, t_int, dy,
                  static_cast<int>(C), 1.0f, dv, row_stride);
      // softmax backward, row by row, with the 1/sqrt(hs) folded in
      for (std::int64_t t = 0; t < T; ++t) {
        const float* p = probabilities + t * T;
        float* d = dscores + t * T;
        float weighted = 0.0f;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) weighted += p[t2] * d[t2];
        for (std::int64_t t2 = 0; t2 <= t; ++t2) d[t2] = p[t2] * (d[t2] - weighted) * scale;
        std::fill(d + t + 1, d + T, 0.0f);
      }
      // dq (T,hs) += dscores (T,T) @ k (T,hs) ; dk (T,hs) += dscores^T @ q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t_int, hs_int, t_int, 1.0f, dscores, t_int, k, row_stride,
                  1.0f, dq, row_stride);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t_int, hs_int, t_int, 1.0f, dscores, t_int, q, row_stride,
                  1.0f, dk, row_stride);
    }
}

}  // namespace strata::cpu::test::legacy
