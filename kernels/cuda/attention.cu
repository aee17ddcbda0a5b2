#include "kernels/cuda/attention.hpp"

#include "kernels/cuda/warp_reduce.cuh"

#include <cmath>

// Launch shapes and reduction orders (they depend only on the attention shape):
// - causal_softmax_kernel, causal_softmax_backward_kernel: one warp per (head, t) row of one batch
//   row, kRowsPerBlock = 8 warps per 256-thread block, grid ceil(n_head * T / 8), one launch per
//   batch row. Lane l walks columns l, l + 32, ... in order; the 32 lane partials meet in an xor
//   butterfly, so every lane ends with the same bits.
// - The products: cublasSgemmStridedBatched, per batch row, batched over query heads (HeadBatch).
//   A call that adds into dk or dv never holds two query heads of one kv head; the query heads of
//   a group add in head order, one call after the other on the stream.
//
// cuBLAS is column-major: a row-major (r, c) matrix with leading dimension ld is, to cuBLAS, its
// (c, r) transpose with the same ld. So row-major C = A·B is the column-major call Cᵀ = Bᵀ·Aᵀ with
// the operands swapped; every call below states its row-major meaning.

namespace strata::cuda {

namespace {

constexpr int kRowsPerBlock = 8;
constexpr int kRowThreads = kRowsPerBlock * kWarpSize;

// The first key position t sees: 0, or under a sliding window of w the w - 1 before it.
__device__ int first_key(int t, int window) {
  return window > 0 ? max(0, t - window + 1) : 0;
}

// att holds `rows` rows of seq_len scaled scores, row r at position t = r % seq_len. Columns
// first_key(t)..t become softmax probabilities (the formula of the CPU kernel); the others become
// exactly 0, so the products with P ignore them.
__global__ void causal_softmax_kernel(float* att, std::int64_t rows, int seq_len, int window) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int t = static_cast<int>(row % seq_len), first = first_key(t, window);
  float* p = att + row * seq_len;
  float max_value = -INFINITY;
  for (int j = first + lane; j <= t; j += kWarpSize) max_value = fmaxf(max_value, p[j]);
  max_value = warp_max(max_value);
  float sum = 0.0f;
  for (int j = first + lane; j <= t; j += kWarpSize) sum += expf(p[j] - max_value);
  sum = warp_sum(sum);
  const float inverse_sum = 1.0f / sum;
  for (int j = lane; j < seq_len; j += kWarpSize)
    p[j] = j >= first && j <= t ? expf(p[j] - max_value) * inverse_sum : 0.0f;
}

// dscores holds dP on entry and dS = P ⊙ (dP − rowsum(dP ⊙ P)) · scale on exit, zero outside the
// columns row t sees (so dS·K and dSᵀ·Q ignore them); att holds P, rows as above.
__global__ void causal_softmax_backward_kernel(float* dscores, const float* att, std::int64_t rows, int seq_len,
                                               int window, float scale) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int t = static_cast<int>(row % seq_len), first = first_key(t, window);
  const float* p = att + row * seq_len;
  float* d = dscores + row * seq_len;
  float weighted = 0.0f;
  for (int j = first + lane; j <= t; j += kWarpSize) weighted += p[j] * d[j];
  weighted = warp_sum(weighted);
  for (int j = lane; j < seq_len; j += kWarpSize) d[j] = j >= first && j <= t ? p[j] * (d[j] - weighted) * scale : 0.0f;
}

unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

// A cuBLAS operand: the first batch entry, its leading dimension and the stride between entries.
template <typename Float>
struct Matrix {
  Float* data;
  int ld;
  long long stride;
};

cublasStatus_t gemm(cublasHandle_t cublas, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
                    float alpha, Matrix<const float> a, Matrix<const float> b, float beta, Matrix<float> c, int count) {
  return cublasSgemmStridedBatched(cublas, op_a, op_b, m, n, k, &alpha, a.data, a.ld, a.stride, b.data, b.ld, b.stride,
                                   &beta, c.data, c.ld, c.stride, count);
}

// One batched call covers `count` query heads first_head + i * head_step (i < count), which read
// kv heads first_kv + i * kv_step.
struct HeadBatch {
  int first_head, head_step, first_kv, kv_step, count;
};

// across_kv: call l covers the l-th query head of every group (kv_step 1), `group` calls; no two
//   entries share a kv head, so these calls may add into dk and dv, in head order within a group.
// within_group: call l covers the query heads of kv head l (kv_step 0), n_kv_head calls; only for
//   products whose output is per query head.
enum class Batching : std::uint8_t { across_kv, within_group };

class Layout {
 public:
  explicit Layout(const AttentionShape& shape)
      : seq_len_(shape.seq_len),
        n_head_(shape.n_head),
        n_kv_head_(shape.n_kv_head),
        head_dim_(shape.head_dim),
        group_(shape.n_head / shape.n_kv_head) {}

  // For products that only read the kv heads: the batching with fewer calls.
  Batching reads() const { return group_ <= n_kv_head_ ? Batching::across_kv : Batching::within_group; }
  int calls(Batching batching) const { return batching == Batching::across_kv ? group_ : n_kv_head_; }
  HeadBatch batch(Batching batching, int call) const {
    if (batching == Batching::across_kv) return {call, group_, 0, 1, n_kv_head_};
    return {call * group_, 1, call, 0, group_};
  }

  std::int64_t scores_per_batch_row() const { return static_cast<std::int64_t>(n_head_) * seq_len_ * seq_len_; }
  std::int64_t score_rows_per_batch_row() const { return static_cast<std::int64_t>(n_head_) * seq_len_; }
  int out_stride() const { return n_head_ * head_dim_; }

  // Per-query-head rows of batch row b (q, dq, out, dout): row-major (T, D) with leading dimension
  // row_stride; to cuBLAS a (D, T) matrix.
  template <typename Float>
  Matrix<Float> query_heads(Float* base, std::int64_t row_stride, std::int64_t b, const HeadBatch& heads) const {
    return {base + b * seq_len_ * row_stride + static_cast<std::int64_t>(heads.first_head) * head_dim_,
            static_cast<int>(row_stride), static_cast<long long>(heads.head_step) * head_dim_};
  }
  // Per-kv-head rows of batch row b (k, v, dk, dv), likewise.
  template <typename Float>
  Matrix<Float> kv_heads(Float* base, std::int64_t row_stride, std::int64_t b, const HeadBatch& heads) const {
    return {base + b * seq_len_ * row_stride + static_cast<std::int64_t>(heads.first_kv) * head_dim_,
            static_cast<int>(row_stride), static_cast<long long>(heads.kv_step) * head_dim_};
  }
  // The (T, T) score matrices of one batch row, (n_head, T, T) from `base`: row-major with
  // leading dimension T; to cuBLAS their transposes.
  template <typename Float>
  Matrix<Float> scores(Float* base, const HeadBatch& heads) const {
    const long long square = static_cast<long long>(seq_len_) * seq_len_;
    return {base + heads.first_head * square, seq_len_, heads.head_step * square};
  }

 private:
  int seq_len_, n_head_, n_kv_head_, head_dim_, group_;
};

bool runnable(const AttentionShape& shape) {
  return shape.batch > 0 && shape.seq_len > 0 && shape.n_head > 0 && shape.n_kv_head > 0 && shape.head_dim > 0 &&
         shape.n_head % shape.n_kv_head == 0;
}

template <typename Float>
Matrix<const float> as_input(Matrix<Float> matrix) {
  return {matrix.data, matrix.ld, matrix.stride};
}

}  // namespace

std::int64_t attention_saved_floats(const AttentionShape& shape) {
  return static_cast<std::int64_t>(shape.batch) * shape.n_head * shape.seq_len * shape.seq_len;
}

std::int64_t attention_scratch_floats(const AttentionShape& shape) {
  return static_cast<std::int64_t>(shape.n_head) * shape.seq_len * shape.seq_len;
}

cublasStatus_t attention_forward(cudaStream_t stream, cublasHandle_t cublas, const AttentionShape& shape, float* out,
                                 float* saved, const AttentionInputs& in) {
  if (!runnable(shape)) return CUBLAS_STATUS_SUCCESS;
  const Layout layout(shape);
  const int T = shape.seq_len, D = shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const Batching reads = layout.reads();
  const std::int64_t rows = layout.score_rows_per_batch_row();
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    float* att = saved + b * layout.scores_per_batch_row();
    for (int call = 0; call < layout.calls(reads); ++call) {
      const HeadBatch heads = layout.batch(reads, call);
      // Row-major S_h (T,T) = scale * Q_h (T,D) · K_kv(h)ᵀ (D,T), S_h at att + h*T*T, ld T.
      // Column-major: Sᵀ (T,T) = scale * op_T(K buffer (D,T), ld kv_stride) · Q buffer (D,T), ld q_stride.
      if (const cublasStatus_t status =
              gemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, scale, layout.kv_heads(in.k, in.kv_stride, b, heads),
                   layout.query_heads(in.q, in.q_stride, b, heads), 0.0f, layout.scores(att, heads), heads.count);
          status != CUBLAS_STATUS_SUCCESS)
        return status;
    }
    causal_softmax_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(att, rows, T, shape.window);
    for (int call = 0; call < layout.calls(reads); ++call) {
      const HeadBatch heads = layout.batch(reads, call);
      // Row-major O_h (T,D) = P_h (T,T) · V_kv(h) (T,D), O_h at out + (b*T)*n_head*D + h*D, ld n_head*D.
      // Column-major: Oᵀ (D,T) = V buffer (D,T), ld kv_stride · P buffer (T,T), ld T.
      if (const cublasStatus_t status =
              gemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, 1.0f, layout.kv_heads(in.v, in.kv_stride, b, heads),
                   as_input(layout.scores(att, heads)), 0.0f, layout.query_heads(out, layout.out_stride(), b, heads),
                   heads.count);
          status != CUBLAS_STATUS_SUCCESS)
        return status;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t attention_backward(cudaStream_t stream, cublasHandle_t cublas, const AttentionShape& shape,
                                  const AttentionGrads& grads, const float* dout, const AttentionInputs& in,
                                  const float* saved, float* scratch) {
  if (!runnable(shape)) return CUBLAS_STATUS_SUCCESS;
  const Layout layout(shape);
  const int T = shape.seq_len, D = shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const Batching reads = layout.reads();
  const std::int64_t rows = layout.score_rows_per_batch_row();
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const float* att = saved + b * layout.scores_per_batch_row();
    float* dscores = scratch;  // one batch row at a time: dP, then dS in place
    for (int call = 0; call < layout.calls(reads); ++call) {
      const HeadBatch heads = layout.batch(reads, call);
      // Row-major dP_h (T,T) = dO_h (T,D) · V_kv(h)ᵀ (D,T), dP_h at scratch + h*T*T, ld T.
      // Column-major: dPᵀ (T,T) = op_T(V buffer (D,T), ld kv_stride) · dO buffer (D,T), ld n_head*D.
      if (const cublasStatus_t status =
              gemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, 1.0f, layout.kv_heads(in.v, in.kv_stride, b, heads),
                   layout.query_heads(dout, layout.out_stride(), b, heads), 0.0f, layout.scores(dscores, heads),
                   heads.count);
          status != CUBLAS_STATUS_SUCCESS)
        return status;
    }
    for (int call = 0; call < layout.calls(Batching::across_kv); ++call) {
      const HeadBatch heads = layout.batch(Batching::across_kv, call);
      // Row-major dV_kv(h) (T,D) += P_hᵀ (T,T) · dO_h (T,D), ld grads.kv_stride; call g adds the
      // g-th query head of every group, so each kv head gets its query heads in order.
      // Column-major: dVᵀ (D,T) += dO buffer (D,T), ld n_head*D · op_T(P buffer (T,T), ld T).
      if (const cublasStatus_t status = gemm(
              cublas, CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, 1.0f, layout.query_heads(dout, layout.out_stride(), b, heads),
              layout.scores(att, heads), 1.0f, layout.kv_heads(grads.dv, grads.kv_stride, b, heads), heads.count);
          status != CUBLAS_STATUS_SUCCESS)
        return status;
    }
    causal_softmax_backward_kernel<<<row_blocks(rows), kRowThreads, 0, stream>>>(dscores, att, rows, T, shape.window,
                                                                                 scale);
    for (int call = 0; call < layout.calls(reads); ++call) {
      const HeadBatch heads = layout.batch(reads, call);
      // Row-major dQ_h (T,D) += dS_h (T,T) · K_kv(h) (T,D), ld grads.q_stride.
      // Column-major: dQᵀ (D,T) += K buffer (D,T), ld kv_stride · dS buffer (T,T), ld T.
      if (const cublasStatus_t status =
              gemm(cublas, CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, 1.0f, layout.kv_heads(in.k, in.kv_stride, b, heads),
                   as_input(layout.scores(dscores, heads)), 1.0f,
                   layout.query_heads(grads.dq, grads.q_stride, b, heads), heads.count);
          status != CUBLAS_STATUS_SUCCESS)
        return status;
    }
    for (int call = 0; call < layout.calls(Batching::across_kv); ++call) {
      const HeadBatch heads = layout.batch(Batching::across_kv, call);
      // Row-major dK_kv(h) (T,D) += dS_hᵀ (T,T) · Q_h (T,D), ld grads.kv_stride, query heads in order.
      // Column-major: dKᵀ (D,T) += Q buffer (D,T), ld q_stride · op_T(dS buffer (T,T), ld T).
      if (const cublasStatus_t status =
              gemm(cublas, CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, 1.0f, layout.query_heads(in.q, in.q_stride, b, heads),
                   as_input(layout.scores(dscores, heads)), 1.0f, layout.kv_heads(grads.dk, grads.kv_stride, b, heads),
                   heads.count);
          status != CUBLAS_STATUS_SUCCESS)
        return status;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace strata::cuda
