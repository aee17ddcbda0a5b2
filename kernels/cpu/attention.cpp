#include "kernels/cpu/attention.hpp"

#include <cblas.h>

#include <algorithm>

namespace strata::cpu {

// Fast path: one (batch, head) pair per task, the three products as single-threaded sgemm calls
// on strided views (OpenBLAS runs serially inside an OpenMP region), the softmax in between.
void attention_forward(float* out, float* att, const AttentionInputs& in, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t group = NH / shape.n_kv_head, out_stride = NH * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int q_stride = static_cast<int>(in.q_stride), kv_stride = static_cast<int>(in.kv_stride);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      const float* q = in.q + b * T * in.q_stride + h * D;
      const float* k = in.k + b * T * in.kv_stride + (h / group) * D;
      const float* v = in.v + b * T * in.kv_stride + (h / group) * D;
      float* scores = att + (b * NH + h) * T * T;
      // scores (T,T) = scale * q (T,D) @ k^T (D,T); only the lower triangle is used.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T), static_cast<int>(T),
                  static_cast<int>(D), scale, q, q_stride, k, kv_stride, 0.0f, scores, static_cast<int>(T));
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
      // out (T,D) = att (T,T) @ v (T,D)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(T), static_cast<int>(D),
                  static_cast<int>(T), 1.0f, scores, static_cast<int>(T), v, kv_stride, 0.0f,
                  out + b * T * out_stride + h * D, static_cast<int>(out_stride));
    }
}

// One (batch, key/value head) pair per task: the query heads of a group add into the same dk and
// dv rows, so they run in order inside one task; the result does not depend on the thread count.
void attention_backward(const AttentionGrads& grads, float* scratch, const float* dout, const AttentionInputs& in,
                        const float* att, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t KV = shape.n_kv_head, group = NH / KV, out_stride = NH * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int q_stride = static_cast<int>(in.q_stride), kv_stride = static_cast<int>(in.kv_stride);
  const int dq_stride = static_cast<int>(grads.q_stride), dkv_stride = static_cast<int>(grads.kv_stride);
  const int t_int = static_cast<int>(T);
  const int d_int = static_cast<int>(D);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t kv = 0; kv < KV; ++kv)
      for (std::int64_t h = kv * group; h < (kv + 1) * group; ++h) {
        const float* q = in.q + b * T * in.q_stride + h * D;
        const float* k = in.k + b * T * in.kv_stride + kv * D;
        const float* v = in.v + b * T * in.kv_stride + kv * D;
        float* dq = grads.dq + b * T * grads.q_stride + h * D;
        float* dk = grads.dk + b * T * grads.kv_stride + kv * D;
        float* dv = grads.dv + b * T * grads.kv_stride + kv * D;
        const float* probabilities = att + (b * NH + h) * T * T;
        const float* dy = dout + b * T * out_stride + h * D;
        float* dscores = scratch + (b * NH + h) * T * T;
        // datt (T,T) = dy (T,D) @ v^T ; dv (T,D) += att^T (T,T) @ dy (T,D)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t_int, t_int, d_int, 1.0f, dy,
                    static_cast<int>(out_stride), v, kv_stride, 0.0f, dscores, t_int);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t_int, d_int, t_int, 1.0f, probabilities, t_int, dy,
                    static_cast<int>(out_stride), 1.0f, dv, dkv_stride);
        // softmax backward, row by row, with the 1/sqrt(D) folded in
        for (std::int64_t t = 0; t < T; ++t) {
          const float* p = probabilities + t * T;
          float* d = dscores + t * T;
          float weighted = 0.0f;
          for (std::int64_t t2 = 0; t2 <= t; ++t2) weighted += p[t2] * d[t2];
          for (std::int64_t t2 = 0; t2 <= t; ++t2) d[t2] = p[t2] * (d[t2] - weighted) * scale;
          std::fill(d + t + 1, d + T, 0.0f);
        }
        // dq (T,D) += dscores (T,T) @ k (T,D) ; dk (T,D) += dscores^T @ q
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t_int, d_int, t_int, 1.0f, dscores, t_int, k, kv_stride,
                    1.0f, dq, dq_stride);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t_int, d_int, t_int, 1.0f, dscores, t_int, q, q_stride,
                    1.0f, dk, dkv_stride);
      }
}

}  // namespace strata::cpu
