#include "cpu/flash_attention_cpu.hpp"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "strata/cpu_clones.hpp"

namespace strata::flash::cpu {

namespace {

// Query rows and key columns per tile. A score tile (kBr, kBc) and its gradient fit in L1/L2
// beside the q, k, v rows they come from; the products run as single-threaded sgemm calls
// (OpenBLAS runs serially inside an OpenMP region).
constexpr std::int64_t kBr = 64;
constexpr std::int64_t kBc = 128;
using ScoreTile = std::array<float, kBr * kBc>;
using RowValues = std::array<float, kBr>;

// This file builds with -ffast-math so that exp vectorizes (glibc's libmvec, one width per clone).
// No infinities are used: the first key tile in which a row attends to a key sets the row's
// running max, from one of those scores.

// The first column of a tile row that the row attends to: 0, or with a sliding window the column of
// the key window - 1 positions before the query. `diagonal` is the first query's index minus the
// first key's.
std::int64_t first_column(std::int64_t diagonal, std::int64_t r, std::int64_t window, std::int64_t cols) {
  return window > 0 ? std::clamp<std::int64_t>(diagonal + r - window + 1, 0, cols) : 0;
}

// The first key tile a query tile starting at r0 meets: 0, or with a sliding window the tile
// holding its first row's first key.
std::int64_t first_key_tile(std::int64_t r0, std::int64_t window) {
  return window > 0 ? std::max<std::int64_t>(0, r0 - window + 1) / kBc * kBc : 0;
}

// The tile's scores become probabilities relative to the running max of each row; columns past
// the diagonal (key > query) and, with a sliding window, before the window become 0. Updates the
// running max and sum and writes each row's rescale factor of the old output. `started`: whether
// the row has met a key it attends to in an earlier tile (a row before its window meets none).
STRATA_CPU_CLONES void online_softmax_tile(float* scores, std::int64_t rows, std::int64_t cols, std::int64_t diagonal,
                                           std::int64_t window, bool* started, float* row_max, float* row_sum,
                                           float* rescale) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* s = scores + r * kBc;
    const std::int64_t valid = std::clamp<std::int64_t>(diagonal + r + 1, 0, cols);
    const std::int64_t low = first_column(diagonal, r, window, cols);
    if (low >= valid) {  // no key of this tile is in the row's window: its output and sums stay
      std::fill(s, s + cols, 0.0f);
      rescale[r] = started[r] ? 1.0f : 0.0f;
      continue;
    }
    const bool first_tile = !started[r];
    started[r] = true;
    const float old_max = row_max[r];
    float max_value = first_tile ? s[low] : old_max;
    for (std::int64_t c = low; c < valid; ++c) max_value = std::max(max_value, s[c]);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = low; c < valid; ++c) {
      const float p = std::exp(s[c] - max_value);
      s[c] = p;
      sum += p;
    }
    for (std::int64_t c = 0; c < low; ++c) s[c] = 0.0f;
    for (std::int64_t c = valid; c < cols; ++c) s[c] = 0.0f;
    const float alpha = first_tile ? 0.0f : std::exp(old_max - max_value);
    row_sum[r] = first_tile ? sum : row_sum[r] * alpha + sum;
    row_max[r] = max_value;
    rescale[r] = alpha;
  }
}

// Backward: P = exp(S - lse) from the saved log-sum-exp, masked like the forward.
STRATA_CPU_CLONES void probabilities_tile(float* scores, std::int64_t rows, std::int64_t cols, std::int64_t diagonal,
                                          std::int64_t window, const float* lse) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* s = scores + r * kBc;
    const std::int64_t valid = std::clamp<std::int64_t>(diagonal + r + 1, 0, cols);
    const std::int64_t low = first_column(diagonal, r, window, cols);
    const float row_lse = lse[r];
#pragma omp simd
    for (std::int64_t c = low; c < valid; ++c) s[c] = std::exp(s[c] - row_lse);
    for (std::int64_t c = 0; c < low; ++c) s[c] = 0.0f;
    for (std::int64_t c = valid; c < cols; ++c) s[c] = 0.0f;
  }
}

// dS = P ⊙ (dP - D) in place of dP; D is rowsum(dout ⊙ out) of each query row.
STRATA_CPU_CLONES void dscores_tile(float* dprobabilities, const float* probabilities, std::int64_t rows,
                                    std::int64_t cols, const float* row_delta) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* d = dprobabilities + r * kBc;
    const float* p = probabilities + r * kBc;
    const float delta = row_delta[r];
#pragma omp simd
    for (std::int64_t c = 0; c < cols; ++c) d[c] = p[c] * (d[c] - delta);
  }
}

// result[t] = dot(a row t, b row t) over D, for `rows` rows.
STRATA_CPU_CLONES void row_dots(float* result, const float* a, std::int64_t a_stride, const float* b,
                                std::int64_t b_stride, std::int64_t rows, std::int64_t D) {
  for (std::int64_t t = 0; t < rows; ++t) {
    const float* x = a + t * a_stride;
    const float* y = b + t * b_stride;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t i = 0; i < D; ++i) sum += x[i] * y[i];
    result[t] = sum;
  }
}

// Not under -ffast-math's reciprocal square root: the same scale as the built-in kernel's.
float softmax_scale(std::int64_t D) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
}

std::int64_t tiles(std::int64_t T, std::int64_t tile) {
  return (T + tile - 1) / tile;
}

// One query tile of one (batch, head): every key tile up to the diagonal, the output
// accumulated in place in `out` (rows owned by this task), normalised at the end.
void forward_query_tile(const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in, std::int64_t b,
                        std::int64_t h, std::int64_t r0) {
  const std::int64_t T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t kv_head = h / (NH / shape.n_kv_head), out_stride = NH * D;
  const std::int64_t rows = std::min(kBr, T - r0);
  const float scale = softmax_scale(D);
  const float* q = in.q + (b * T + r0) * in.q_stride + h * D;
  const float* k = in.k + b * T * in.kv_stride + kv_head * D;
  const float* v = in.v + b * T * in.kv_stride + kv_head * D;
  float* o = out + (b * T + r0) * out_stride + h * D;
  const int d_int = static_cast<int>(D), rows_int = static_cast<int>(rows);
  const int q_stride = static_cast<int>(in.q_stride), kv_stride = static_cast<int>(in.kv_stride);
  ScoreTile scores;
  RowValues row_max, row_sum, rescale;
  std::array<bool, kBr> started{};
  const std::int64_t c_begin = first_key_tile(r0, shape.window);
  for (std::int64_t c0 = c_begin; c0 < r0 + rows; c0 += kBc) {
    const std::int64_t cols = std::min(kBc, r0 + rows - c0);
    const bool first_tile = c0 == c_begin;
    const int cols_int = static_cast<int>(cols);
    // S (rows, cols) = scale * q (rows, D) @ k^T (D, cols)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows_int, cols_int, d_int, scale, q, q_stride,
                k + c0 * in.kv_stride, kv_stride, 0.0f, scores.data(), static_cast<int>(kBc));
    online_softmax_tile(scores.data(), rows, cols, r0 - c0, shape.window, started.data(), row_max.data(),
                        row_sum.data(), rescale.data());
    if (!first_tile)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t i = 0; i < D; ++i) o[r * out_stride + i] *= rescale[r];
    // O (rows, D) += P (rows, cols) @ v (cols, D)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows_int, d_int, cols_int, 1.0f, scores.data(),
                static_cast<int>(kBc), v + c0 * in.kv_stride, kv_stride, first_tile ? 0.0f : 1.0f, o,
                static_cast<int>(out_stride));
  }
  float* lse_rows = lse + (b * NH + h) * T + r0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float inverse_sum = 1.0f / row_sum[r];
    for (std::int64_t i = 0; i < D; ++i) o[r * out_stride + i] *= inverse_sum;
    lse_rows[r] = row_max[r] + std::log(row_sum[r]);
  }
}

// All tiles of one (batch, query head): each query tile against the key tiles up to the diagonal.
// dq rows are this task's alone; dk and dv go to `dk`/`dv` with row stride `dkv_stride` (the
// gradients themselves when the head is alone in its key/value group, else this head's partial
// rows). Each element is summed by this task in a fixed order, whatever the thread count.
void backward_head(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                   const AttentionInputs& in, const float* lse, const float* delta, std::int64_t b, std::int64_t h,
                   float* dk, float* dv, std::int64_t dkv_stride) {
  const std::int64_t T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t kv_head = h / (NH / shape.n_kv_head), out_stride = NH * D;
  const float scale = softmax_scale(D);
  const int d_int = static_cast<int>(D), tile_ld = static_cast<int>(kBc), dkv_ld = static_cast<int>(dkv_stride);
  const int q_stride = static_cast<int>(in.q_stride), kv_stride = static_cast<int>(in.kv_stride);
  const int dq_stride = static_cast<int>(grads.q_stride);
  const float* k = in.k + b * T * in.kv_stride + kv_head * D;
  const float* v = in.v + b * T * in.kv_stride + kv_head * D;
  ScoreTile probabilities, dscores;
  for (std::int64_t r0 = 0; r0 < T; r0 += kBr) {
    const std::int64_t rows = std::min(kBr, T - r0);
    const int rows_int = static_cast<int>(rows);
    const float* q = in.q + (b * T + r0) * in.q_stride + h * D;
    const float* dy = dout + (b * T + r0) * out_stride + h * D;
    float* dq = grads.dq + (b * T + r0) * grads.q_stride + h * D;
    const float* row_lse = lse + (b * NH + h) * T + r0;
    const float* row_delta = delta + (b * NH + h) * T + r0;
    for (std::int64_t c0 = first_key_tile(r0, shape.window); c0 < r0 + rows; c0 += kBc) {
      const std::int64_t cols = std::min(kBc, r0 + rows - c0);
      const int cols_int = static_cast<int>(cols);
      // P = exp(scale * q @ k^T - lse)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows_int, cols_int, d_int, scale, q, q_stride,
                  k + c0 * in.kv_stride, kv_stride, 0.0f, probabilities.data(), tile_ld);
      probabilities_tile(probabilities.data(), rows, cols, r0 - c0, shape.window, row_lse);
      // dv (cols, D) += P^T (cols, rows) @ dout (rows, D)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols_int, d_int, rows_int, 1.0f, probabilities.data(),
                  tile_ld, dy, static_cast<int>(out_stride), 1.0f, dv + c0 * dkv_stride, dkv_ld);
      // dP (rows, cols) = dout (rows, D) @ v^T (D, cols); dS = P ⊙ (dP - D)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows_int, cols_int, d_int, 1.0f, dy,
                  static_cast<int>(out_stride), v + c0 * in.kv_stride, kv_stride, 0.0f, dscores.data(), tile_ld);
      dscores_tile(dscores.data(), probabilities.data(), rows, cols, row_delta);
      // dq (rows, D) += scale * dS @ k ; dk (cols, D) += scale * dS^T @ q
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows_int, d_int, cols_int, scale, dscores.data(), tile_ld,
                  k + c0 * in.kv_stride, kv_stride, 1.0f, dq, dq_stride);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols_int, d_int, rows_int, scale, dscores.data(), tile_ld, q,
                  q_stride, 1.0f, dk + c0 * dkv_stride, dkv_ld);
    }
  }
}

}  // namespace

std::int64_t lse_floats(const AttentionShape& shape) {
  return std::int64_t{shape.batch} * shape.n_head * shape.seq_len;
}

// rowsum(dout ⊙ out) per score row; under grouped-query attention also every query head's
// partial dk and dv rows, (B, n_head, T, D) each, summed into the gradients in head order.
std::int64_t scratch_floats(const AttentionShape& shape) {
  const std::int64_t rows = std::int64_t{shape.batch} * shape.n_head * shape.seq_len;
  const bool grouped = shape.n_kv_head < shape.n_head;
  return rows + (grouped ? 2 * rows * shape.head_dim : 0);
}

void forward(const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in) {
  const std::int64_t B = shape.batch, NH = shape.n_head, query_tiles = tiles(shape.seq_len, kBr);
  // The last query tiles meet the most key tiles: hand them out first, the rest fill in behind.
#pragma omp parallel for collapse(3) schedule(dynamic, 1)
  for (std::int64_t tile = 0; tile < query_tiles; ++tile)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < NH; ++h)
        forward_query_tile(shape, out, lse, in, b, h, (query_tiles - 1 - tile) * kBr);
}

void backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout, const float* out,
              const AttentionInputs& in, const float* lse, float* scratch) {
  const std::int64_t B = shape.batch, T = shape.seq_len, NH = shape.n_head, KV = shape.n_kv_head;
  const std::int64_t D = shape.head_dim, out_stride = NH * D, group = NH / KV;
  float* delta = scratch;  // (B, NH, T): rowsum(dout ⊙ out) of every query row of every head
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      row_dots(delta + (b * NH + h) * T, dout + b * T * out_stride + h * D, out_stride,
               out + b * T * out_stride + h * D, out_stride, T, D);
  // One task per (batch, query head). A head alone in its group adds into dk and dv directly;
  // grouped heads write partial rows, which a second pass adds up in head order.
  float* partial_dk = scratch + B * NH * T;
  float* partial_dv = partial_dk + B * NH * T * D;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h) {
      if (group == 1) {
        const std::int64_t offset = b * T * grads.kv_stride + h * D;
        backward_head(shape, grads, dout, in, lse, delta, b, h, grads.dk + offset, grads.dv + offset, grads.kv_stride);
        continue;
      }
      float* dk = partial_dk + (b * NH + h) * T * D;
      float* dv = partial_dv + (b * NH + h) * T * D;
      std::fill(dk, dk + T * D, 0.0f);
      std::fill(dv, dv + T * D, 0.0f);
      backward_head(shape, grads, dout, in, lse, delta, b, h, dk, dv, D);
    }
  if (group == 1) return;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t kv = 0; kv < KV; ++kv) {
        float* dk = grads.dk + (b * T + t) * grads.kv_stride + kv * D;
        float* dv = grads.dv + (b * T + t) * grads.kv_stride + kv * D;
        for (std::int64_t h = kv * group; h < (kv + 1) * group; ++h) {
          const float* pk = partial_dk + ((b * NH + h) * T + t) * D;
          const float* pv = partial_dv + ((b * NH + h) * T + t) * D;
          for (std::int64_t i = 0; i < D; ++i) {
            dk[i] += pk[i];
            dv[i] += pv[i];
          }
        }
      }
}

}  // namespace strata::flash::cpu
