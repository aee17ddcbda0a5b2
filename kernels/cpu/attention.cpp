#include "kernels/cpu/attention.hpp"

#include <cblas.h>

#include <algorithm>

namespace strata::cpu {

// Fast path: one (batch, head) pair per task, the products as single-threaded sgemm calls on
// strided views (OpenBLAS runs serially inside an OpenMP region), the softmax in between. Causal
// rows only: query rows go in tiles of kQueryTile, and a tile ending at row t1 meets keys [0, t1)
// alone, so the masked upper triangle is computed only inside each diagonal tile (a 1/n_tiles
// excess) instead of everywhere (2x). With a sliding window a tile starting at row t0 meets keys
// from first_key(t0) on: [k0, t1).
namespace {
constexpr std::int64_t kQueryTile = 128;
}  // namespace

void attention_forward(float* out, float* att, const AttentionInputs& in, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t group = NH / shape.n_kv_head, out_stride = NH * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int q_stride = static_cast<int>(in.q_stride), kv_stride = static_cast<int>(in.kv_stride);
  const int t_int = static_cast<int>(T), d_int = static_cast<int>(D);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      const float* q = in.q + b * T * in.q_stride + h * D;
      const float* k = in.k + b * T * in.kv_stride + (h / group) * D;
      const float* v = in.v + b * T * in.kv_stride + (h / group) * D;
      float* scores = att + (b * NH + h) * T * T;
      float* y = out + b * T * out_stride + h * D;
      for (std::int64_t t0 = 0; t0 < T; t0 += kQueryTile) {
        const std::int64_t t1 = std::min(T, t0 + kQueryTile);
        const std::int64_t k0 = first_key(t0, shape);
        const int rows = static_cast<int>(t1 - t0), keys = static_cast<int>(t1 - k0);
        // scores[t0:t1, k0:t1] = scale * q[t0:t1] @ k[k0:t1]^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, d_int, scale, q + t0 * in.q_stride, q_stride,
                    k + k0 * in.kv_stride, kv_stride, 0.0f, scores + t0 * T + k0, t_int);
        for (std::int64_t t = t0; t < t1; ++t) {
          float* row = scores + t * T;
          const std::int64_t first = first_key(t, shape);
          float max_value = -std::numeric_limits<float>::infinity();
          for (std::int64_t t2 = first; t2 <= t; ++t2) max_value = std::max(max_value, row[t2]);
          float sum = 0.0f;
          for (std::int64_t t2 = first; t2 <= t; ++t2) {
            row[t2] = std::exp(row[t2] - max_value);
            sum += row[t2];
          }
          const float inverse_sum = 1.0f / sum;
          for (std::int64_t t2 = first; t2 <= t; ++t2) row[t2] *= inverse_sum;
          // The saved probabilities are zero above the diagonal and before the window.
          std::fill(row, row + first, 0.0f);
          std::fill(row + t + 1, row + T, 0.0f);
        }
        // out[t0:t1] = att[t0:t1, k0:t1] @ v[k0:t1]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d_int, keys, 1.0f, scores + t0 * T + k0, t_int,
                    v + k0 * in.kv_stride, kv_stride, 0.0f, y + t0 * out_stride, static_cast<int>(out_stride));
      }
    }
}

// One (batch, key/value head) pair per task: the query heads of a group add into the same dk and
// dv rows, so they run in order inside one task; the result does not depend on the thread count.
// Query tiles as in the forward pass: tile [t0, t1) touches keys [0, t1) only.
void attention_backward(const AttentionGrads& grads, float* scratch, const float* dout, const AttentionInputs& in,
                        const float* att, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t KV = shape.n_kv_head, group = NH / KV, out_stride = NH * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int q_stride = static_cast<int>(in.q_stride), kv_stride = static_cast<int>(in.kv_stride);
  const int dq_stride = static_cast<int>(grads.q_stride), dkv_stride = static_cast<int>(grads.kv_stride);
  const int t_int = static_cast<int>(T), d_int = static_cast<int>(D), dy_stride = static_cast<int>(out_stride);
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
        for (std::int64_t t0 = 0; t0 < T; t0 += kQueryTile) {
          const std::int64_t t1 = std::min(T, t0 + kQueryTile);
          const std::int64_t k0 = first_key(t0, shape);  // the tile's keys: [k0, t1)
          const int rows = static_cast<int>(t1 - t0), keys = static_cast<int>(t1 - k0);
          const float* p_tile = probabilities + t0 * T + k0;
          float* d_tile = dscores + t0 * T + k0;
          const float* dy_tile = dy + t0 * out_stride;
          // datt[t0:t1, k0:t1] = dy[t0:t1] @ v[k0:t1]^T ; dv[k0:t1] += att[t0:t1, k0:t1]^T @ dy[t0:t1]
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, d_int, 1.0f, dy_tile, dy_stride,
                      v + k0 * in.kv_stride, kv_stride, 0.0f, d_tile, t_int);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, d_int, rows, 1.0f, p_tile, t_int, dy_tile,
                      dy_stride, 1.0f, dv + k0 * grads.kv_stride, dkv_stride);
          // softmax backward, row by row, with the 1/sqrt(D) folded in; zero over the tile's other keys
          for (std::int64_t t = t0; t < t1; ++t) {
            const float* p = probabilities + t * T;
            float* d = dscores + t * T;
            const std::int64_t first = first_key(t, shape);
            float weighted = 0.0f;
            for (std::int64_t t2 = first; t2 <= t; ++t2) weighted += p[t2] * d[t2];
            for (std::int64_t t2 = first; t2 <= t; ++t2) d[t2] = p[t2] * (d[t2] - weighted) * scale;
            std::fill(d + k0, d + first, 0.0f);
            std::fill(d + t + 1, d + t1, 0.0f);
          }
          // dq[t0:t1] += dscores[t0:t1, k0:t1] @ k[k0:t1] ; dk[k0:t1] += dscores[t0:t1, k0:t1]^T @ q[t0:t1]
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d_int, keys, 1.0f, d_tile, t_int,
                      k + k0 * in.kv_stride, kv_stride, 1.0f, dq + t0 * grads.q_stride, dq_stride);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, d_int, rows, 1.0f, d_tile, t_int,
                      q + t0 * in.q_stride, q_stride, 1.0f, dk + k0 * grads.kv_stride, dkv_stride);
        }
      }
}

}  // namespace strata::cpu
