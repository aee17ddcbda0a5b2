#include "cuda/flash_attention_cuda.hpp"

#include <algorithm>
#include <cmath>

#include "cuda/flash_attention_launch.cuh"
#include "cuda/flash_attention_tensor_cores.hpp"
#include "tensor_core_scratch.hpp"

// Launch shapes and reduction orders (they depend only on the attention shape):
// - Every tile kernel runs 256 threads as a 16 x 16 grid: thread (ty, tx) owns rows ty*4 .. ty*4+3
//   of its 64-row output tile and columns tx*4 + 64*g + j (j < 4) of it. A product sums its depth
//   index k = 0, 1, ... in order with fmaf into the thread's own accumulators.
// - forward: grid (ceil(T/64), n_head, B), one block per query tile, the last tiles (the ones
//   with the most keys) first. Key tiles 0..qt in order; the running row sum is a per-thread
//   partial over its 4 columns, rescaled each tile, and the 16 partials of a row meet at the end
//   in an xor butterfly (every lane gets the same bits).
// - delta: one warp per (b, t, h) row, 8 per block, lanes stride the head dim, xor butterfly.
// - backward_kv: grid (ceil(T/64), n_kv_head, B), one block per key tile; it loops over the
//   query heads of its group in head order and, inside, over query tiles qt >= kt in order,
//   accumulating dK and dV in registers; each dk/dv element is added to by one thread only.
// - backward_q: grid (ceil(T/64), n_head, B), one block per query tile, key tiles 0..qt in order.

namespace strata::flash::cuda {

namespace {

using launching::launch;
using launching::Problem;
using launching::problem_of;
using launching::score_gradient;
using launching::tiles;
using launching::Upstream;
using launching::visible;

constexpr int kTile = launching::kTile;  // query rows and key columns per tile
constexpr int kThreads = 256;            // 16 x 16 threads
constexpr int kSide = 16;                // threads along a tile side
constexpr int kPadded = kTile + 4;       // row length of the transposed [d][row] tiles: float4 rows
constexpr int kWarpSize = 32;
constexpr int kDeltaRowsPerBlock = 8;
constexpr unsigned kFullMask = 0xffffffffu;

// acc[i][4g + j] += sum over k < kDepth of a_t[k][ty*4 + i] * b_t[k][64g + tx*4 + j]: both
// operands are k-major in shared memory, with row lengths lda and ldb (multiples of 4).
template <int kCols, int kDepth>
__device__ __forceinline__ void tile_product(float (&acc)[4][kCols / kSide], const float* a_t, int lda,
                                             const float* b_t, int ldb, int ty, int tx) {
  constexpr int kGroups = kCols / kTile;
#pragma unroll 16
  for (int k = 0; k < kDepth; ++k) {
    const float4 a = *reinterpret_cast<const float4*>(a_t + k * lda + ty * 4);
    const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const float4 b = *reinterpret_cast<const float4*>(b_t + k * ldb + g * kTile + tx * 4);
      const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][g * 4 + j] = fmaf(av[i], bv[j], acc[i][g * 4 + j]);
    }
  }
}

// dst[r][d] (row length D) = src row first_row + r, for r < 64; rows >= limit read as 0 so that
// they contribute exact zeros (never stale NaNs) to the products.
template <int D>
__device__ void load_rows(float* dst, const float* src, std::int64_t stride, int first_row, int limit) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    const int row = first_row + r;
    dst[idx] = row < limit ? src[static_cast<std::int64_t>(row) * stride + d] : 0.0f;
  }
}

// dst[d][r] (row length kPadded), the transpose of load_rows. A warp reads 8 consecutive floats
// of 4 rows, so its shared-memory stores hit 32 different banks.
template <int D>
__device__ void load_rows_transposed(float* dst, const float* src, std::int64_t stride, int first_row, int limit) {
  constexpr int kChunksPerBand = D / 8;
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * D; idx += kThreads) {
    const int lane = idx % kWarpSize, chunk = idx / kWarpSize;
    const int d = (chunk % kChunksPerBand) * 8 + lane % 8;
    const int r = (chunk / kChunksPerBand) * 4 + lane / 8;
    const int row = first_row + r;
    dst[d * kPadded + r] = row < limit ? src[static_cast<std::int64_t>(row) * stride + d] : 0.0f;
  }
}

// Writes the thread's 4 x 4 tile values[i][j] (row ty*4 + i, column tx*4 + j) transposed, as
// dst[tx*4 + j][ty*4 + i] with row length kPadded: the k-major operand of the next product.
__device__ __forceinline__ void store_transposed(float* dst, const float (&values)[4][4], int ty, int tx) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
    *reinterpret_cast<float4*>(dst + (tx * 4 + j) * kPadded + ty * 4) =
        make_float4(values[0][j], values[1][j], values[2][j], values[3][j]);
}

// Sum or max over the 16 threads of a row (lanes tx = 0..15 of one half-warp).
__device__ __forceinline__ float row_sum(float value) {
  for (int offset = kSide / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}
__device__ __forceinline__ float row_max(float value) {
  for (int offset = kSide / 2; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

template <int D>
constexpr int forward_smem_floats() {
  return 2 * D * kPadded + kTile * D + kTile * kPadded;
}

// out (B, T, n_head, D); lse (B, n_head, T) = row max + log(row sum) of the scaled scores.
template <int D>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(float* out, float* lse, const Problem problem) {
  constexpr int kOut = D / kSide;
  extern __shared__ float4 shared_float4[];
  float* q_t = reinterpret_cast<float*>(shared_float4);  // [D][kPadded]
  float* k_t = q_t + D * kPadded;                        // [D][kPadded]
  float* v_s = k_t + D * kPadded;                        // [64][D]
  float* p_t = v_s + kTile * D;                          // [64 keys][kPadded]
  const int T = problem.seq_len;
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z), kv_head = h / problem.group;
  const int tx = static_cast<int>(threadIdx.x) % kSide, ty = static_cast<int>(threadIdx.x) / kSide;
  const int first = qt * kTile;
  const float* q_rows = problem.q + static_cast<std::int64_t>(b) * T * problem.q_stride + h * D;
  const float* k_rows = problem.k + static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  const float* v_rows = problem.v + static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  load_rows_transposed<D>(q_t, q_rows, problem.q_stride, first, T);

  float o[4][kOut] = {};
  float m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) m[i] = -INFINITY, l[i] = 0.0f;
  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // the previous tile's k_t, v_s and p_t are no longer read
    load_rows_transposed<D>(k_t, k_rows, problem.kv_stride, kt * kTile, T);
    load_rows<D>(v_s, v_rows, problem.kv_stride, kt * kTile, T);
    __syncthreads();
    float s[4][4] = {};
    tile_product<kTile, D>(s, q_t, kPadded, k_t, kPadded, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = first + ty * 4 + i;
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = kt * kTile + tx * 4 + j;
        s[i][j] = visible(col, row, problem.window) ? s[i][j] * problem.scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      // Without a window, key 0 (first tile) and key `first` (diagonal tile) are visible to every
      // row, so m_new is finite; under one it is -inf until the row's first visible tile.
      const float m_new = fmaxf(m[i], row_max(tile_max));
      const bool seen = m_new != -INFINITY;
      const float alpha = seen ? expf(m[i] - m_new) : 1.0f;
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = seen ? expf(s[i][j] - m_new) : 0.0f;
        part += s[i][j];
      }
      l[i] = l[i] * alpha + part;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < kOut; ++c) o[i][c] *= alpha;
    }
    store_transposed(p_t, s, ty, tx);
    __syncthreads();
    tile_product<D, kTile>(o, p_t, kPadded, v_s, D, ty, tx);
  }

  const int n_head = problem.n_head;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float sum = row_sum(l[i]);
    const int row = first + ty * 4 + i;
    if (row >= T) continue;
    const std::int64_t offset = ((static_cast<std::int64_t>(b) * T + row) * n_head + h) * D;
#pragma unroll
    for (int g = 0; g < kOut / 4; ++g)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[offset + g * kTile + tx * 4 + j] = o[i][g * 4 + j] / sum;
      }
    if (tx == 0) lse[(static_cast<std::int64_t>(b) * n_head + h) * T + row] = m[i] + logf(sum);
  }
}

// delta[(b, h, t)] = sum over d of dout ⊙ out, for rows (b, t, h) of (B, T, n_head, D).
__global__ void delta_kernel(float* delta, const float* dout, const float* out, std::int64_t rows, int seq_len,
                             int n_head, int head_dim) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kDeltaRowsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const float* a = dout + row * head_dim;
  const float* o = out + row * head_dim;
  float sum = 0.0f;
  for (int d = lane; d < head_dim; d += kWarpSize) sum = fmaf(a[d], o[d], sum);
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
  const std::int64_t h = row % n_head, bt = row / n_head;
  if (lane == 0) delta[((bt / seq_len) * n_head + h) * seq_len + bt % seq_len] = sum;
}

template <int D>
constexpr int backward_kv_smem_floats() {
  return 4 * D * kPadded + 2 * kTile * D + kTile * kPadded + 2 * kTile;
}

// One score of the backward pass, recomputed: P = exp(scale * score - lse), zero where the row does
// not see the key (above the diagonal, outside the window) and past the sequence; score_gradient
// turns it into dS, in place of dP.
__device__ __forceinline__ float recomputed_probability(float score, int key, int row, int T, int window, float scale,
                                                        float lse) {
  return visible(key, row, window) && row < T ? expf(score * scale - lse) : 0.0f;
}

// Loads rows of query tile qt of head h: q and dout both ways, and the row statistics.
template <int D>
__device__ void load_query_tile(float* q_t, float* q_s, float* do_t, float* do_s, float* lse_s, float* delta_s,
                                const Problem& problem, const Upstream& up, int b, int h, int qt) {
  const int T = problem.seq_len, first = qt * kTile;
  const std::int64_t out_stride = static_cast<std::int64_t>(problem.n_head) * D;
  const float* q_rows = problem.q + static_cast<std::int64_t>(b) * T * problem.q_stride + h * D;
  const float* do_rows = up.dout + static_cast<std::int64_t>(b) * T * out_stride + h * D;
  if (q_t != nullptr) load_rows_transposed<D>(q_t, q_rows, problem.q_stride, first, T);
  if (q_s != nullptr) load_rows<D>(q_s, q_rows, problem.q_stride, first, T);
  load_rows_transposed<D>(do_t, do_rows, out_stride, first, T);
  if (do_s != nullptr) load_rows<D>(do_s, do_rows, out_stride, first, T);
  if (threadIdx.x < kTile) {
    const int row = first + static_cast<int>(threadIdx.x);
    const std::int64_t stat = (static_cast<std::int64_t>(b) * problem.n_head + h) * T + row;
    lse_s[threadIdx.x] = row < T ? up.lse[stat] : 0.0f;
    delta_s[threadIdx.x] = row < T ? up.delta[stat] : 0.0f;
  }
}

// dk, dv += the gradients of key tile kt of kv head blockIdx.y, summed over the group's query
// heads in head order and over query tiles in order.
template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_kv_kernel(float* dk, float* dv, std::int64_t dkv_stride, const Problem problem, const Upstream up) {
  constexpr int kOut = D / kSide;
  extern __shared__ float4 shared_float4[];
  float* k_t = reinterpret_cast<float*>(shared_float4);  // [D][kPadded]
  float* v_t = k_t + D * kPadded;                        // [D][kPadded]
  float* q_t = v_t + D * kPadded;                        // [D][kPadded]
  float* do_t = q_t + D * kPadded;                       // [D][kPadded]
  float* q_s = do_t + D * kPadded;                       // [64][D]
  float* do_s = q_s + kTile * D;                         // [64][D]
  float* buf = do_s + kTile * D;                         // [64 queries][kPadded]: P, then dS
  float* lse_s = buf + kTile * kPadded;
  float* delta_s = lse_s + kTile;
  const int T = problem.seq_len, n_tiles = static_cast<int>(gridDim.x);
  const int kt = static_cast<int>(blockIdx.x), kv_head = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int tx = static_cast<int>(threadIdx.x) % kSide, ty = static_cast<int>(threadIdx.x) / kSide;
  const std::int64_t kv_offset = static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  load_rows_transposed<D>(k_t, problem.k + kv_offset, problem.kv_stride, kt * kTile, T);
  load_rows_transposed<D>(v_t, problem.v + kv_offset, problem.kv_stride, kt * kTile, T);

  float dk_acc[4][kOut] = {}, dv_acc[4][kOut] = {};
  for (int g = 0; g < problem.group; ++g) {
    const int h = kv_head * problem.group + g;
    for (int qt = kt; qt < n_tiles; ++qt) {
      __syncthreads();  // the previous tile's operands are no longer read
      load_query_tile<D>(q_t, q_s, do_t, do_s, lse_s, delta_s, problem, up, b, h, qt);
      __syncthreads();
      // Transposed tiles: s[i][j] and dp[i][j] are for key ty*4 + i, query tx*4 + j.
      float s[4][4] = {}, dp[4][4] = {};
      tile_product<kTile, D>(s, k_t, kPadded, q_t, kPadded, ty, tx);
      tile_product<kTile, D>(dp, v_t, kPadded, do_t, kPadded, ty, tx);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int key = kt * kTile + ty * 4 + i, row = qt * kTile + tx * 4 + j;
          s[i][j] = recomputed_probability(s[i][j], key, row, T, problem.window, problem.scale, lse_s[tx * 4 + j]);
          dp[i][j] = score_gradient(s[i][j], dp[i][j], delta_s[tx * 4 + j], problem.scale);
        }
      store_transposed(buf, s, ty, tx);  // buf[query][key] = P
      __syncthreads();
      tile_product<D, kTile>(dv_acc, buf, kPadded, do_s, D, ty, tx);
      __syncthreads();
      store_transposed(buf, dp, ty, tx);  // buf[query][key] = dS
      __syncthreads();
      tile_product<D, kTile>(dk_acc, buf, kPadded, q_s, D, ty, tx);
    }
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int key = kt * kTile + ty * 4 + i;
    if (key >= T) continue;
    const std::int64_t offset = (static_cast<std::int64_t>(b) * T + key) * dkv_stride + kv_head * D;
#pragma unroll
    for (int c = 0; c < kOut; ++c) {
      const std::int64_t at = offset + (c / 4) * kTile + tx * 4 + c % 4;
      dk[at] += dk_acc[i][c];
      dv[at] += dv_acc[i][c];
    }
  }
}

template <int D>
constexpr int backward_q_smem_floats() {
  return 4 * D * kPadded + kTile * D + kTile * kPadded + 2 * kTile;
}

// dq += the gradient of query tile qt of head blockIdx.y, key tiles in order.
template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_q_kernel(float* dq, std::int64_t dq_stride, const Problem problem, const Upstream up) {
  constexpr int kOut = D / kSide;
  extern __shared__ float4 shared_float4[];
  float* q_t = reinterpret_cast<float*>(shared_float4);  // [D][kPadded]
  float* do_t = q_t + D * kPadded;                       // [D][kPadded]
  float* k_t = do_t + D * kPadded;                       // [D][kPadded]
  float* v_t = k_t + D * kPadded;                        // [D][kPadded]
  float* k_s = v_t + D * kPadded;                        // [64][D]
  float* buf = k_s + kTile * D;                          // [64 keys][kPadded]: dS transposed
  float* lse_s = buf + kTile * kPadded;
  float* delta_s = lse_s + kTile;
  const int T = problem.seq_len;
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z), kv_head = h / problem.group;
  const int tx = static_cast<int>(threadIdx.x) % kSide, ty = static_cast<int>(threadIdx.x) / kSide;
  const int first = qt * kTile;
  const std::int64_t kv_offset = static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  load_query_tile<D>(q_t, nullptr, do_t, nullptr, lse_s, delta_s, problem, up, b, h, qt);

  float dq_acc[4][kOut] = {};
  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // the previous tile's operands are no longer read
    load_rows_transposed<D>(k_t, problem.k + kv_offset, problem.kv_stride, kt * kTile, T);
    load_rows_transposed<D>(v_t, problem.v + kv_offset, problem.kv_stride, kt * kTile, T);
    load_rows<D>(k_s, problem.k + kv_offset, problem.kv_stride, kt * kTile, T);
    __syncthreads();
    // s[i][j] and dp[i][j] are for query ty*4 + i, key tx*4 + j.
    float s[4][4] = {}, dp[4][4] = {};
    tile_product<kTile, D>(s, q_t, kPadded, k_t, kPadded, ty, tx);
    tile_product<kTile, D>(dp, do_t, kPadded, v_t, kPadded, ty, tx);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = first + ty * 4 + i, key = kt * kTile + tx * 4 + j;
        const float p = recomputed_probability(s[i][j], key, row, T, problem.window, problem.scale, lse_s[ty * 4 + i]);
        dp[i][j] = score_gradient(p, dp[i][j], delta_s[ty * 4 + i], problem.scale);
      }
    store_transposed(buf, dp, ty, tx);  // buf[key][query] = dS
    __syncthreads();
    tile_product<D, kTile>(dq_acc, buf, kPadded, k_s, D, ty, tx);
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = first + ty * 4 + i;
    if (row >= T) continue;
    const std::int64_t offset = (static_cast<std::int64_t>(b) * T + row) * dq_stride + h * D;
#pragma unroll
    for (int c = 0; c < kOut; ++c) dq[offset + (c / 4) * kTile + tx * 4 + c % 4] += dq_acc[i][c];
  }
}

bool runnable(const AttentionShape& shape, Operands operands) {
  return shape.batch > 0 && shape.seq_len > 0 && shape.n_kv_head > 0 && supports(shape, operands);
}

constexpr int smem_bytes(int floats) {
  return floats * static_cast<int>(sizeof(float));
}

std::int64_t row_floats(const AttentionShape& shape) {
  return static_cast<std::int64_t>(shape.batch) * shape.n_head * shape.seq_len;
}

template <int D>
void launch_forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse,
                    const AttentionInputs& in) {
  const dim3 grid(tiles(shape), static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.batch));
  launch(flash_forward_kernel<D>, grid, kThreads, smem_bytes(forward_smem_floats<D>()), stream, out, lse,
         problem_of(shape, in));
}

template <int D>
void launch_backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads,
                     const Problem& problem, const Upstream& up) {
  const dim3 kv_grid(tiles(shape), static_cast<unsigned>(shape.n_kv_head), static_cast<unsigned>(shape.batch));
  launch(flash_backward_kv_kernel<D>, kv_grid, kThreads, smem_bytes(backward_kv_smem_floats<D>()), stream, grads.dk,
         grads.dv, grads.kv_stride, problem, up);
  const dim3 q_grid(tiles(shape), static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.batch));
  launch(flash_backward_q_kernel<D>, q_grid, kThreads, smem_bytes(backward_q_smem_floats<D>()), stream, grads.dq,
         grads.q_stride, problem, up);
}

}  // namespace

bool supports(const AttentionShape& shape, Operands operands) {
  if (!((shape.head_dim == 64 || shape.head_dim == 128) && shape.n_kv_head > 0 && shape.n_head > 0 &&
        shape.n_head % shape.n_kv_head == 0))
    return false;
  // The tiles need more shared memory per block than some devices give (the f32 backward at head
  // dim 128 on an A100), and bf16 products need sm_80: ask the current device.
  int device = 0, optin_bytes = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (operands == Operands::bf16) return major >= 8 && tensor_cores::shared_bytes(shape.head_dim) <= optin_bytes;
  const int needed =
      shape.head_dim == 64
          ? std::max({forward_smem_floats<64>(), backward_kv_smem_floats<64>(), backward_q_smem_floats<64>()})
          : std::max({forward_smem_floats<128>(), backward_kv_smem_floats<128>(), backward_q_smem_floats<128>()});
  return needed * static_cast<int>(sizeof(float)) <= optin_bytes;
}

std::int64_t lse_floats(const AttentionShape& shape) {
  return row_floats(shape);
}

std::int64_t scratch_floats(const AttentionShape& shape, Operands operands) {
  return operands == Operands::bf16 ? tensor_core_scratch_floats(shape) : row_floats(shape);
}

bool forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in,
             Operands operands) {
  if (!runnable(shape, operands)) return false;
  if (operands == Operands::bf16)
    tensor_cores::launch_forward(stream, shape, out, lse, in);
  else if (shape.head_dim == 64)
    launch_forward<64>(stream, shape, out, lse, in);
  else
    launch_forward<128>(stream, shape, out, lse, in);
  return true;
}

bool backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
              const float* out, const AttentionInputs& in, const float* lse, float* scratch, Operands operands) {
  if (!runnable(shape, operands)) return false;
  const std::int64_t rows = row_floats(shape);
  const unsigned delta_blocks = static_cast<unsigned>((rows + kDeltaRowsPerBlock - 1) / kDeltaRowsPerBlock);
  delta_kernel<<<delta_blocks, kDeltaRowsPerBlock * kWarpSize, 0, stream>>>(scratch, dout, out, rows, shape.seq_len,
                                                                            shape.n_head, shape.head_dim);
  if (operands == Operands::bf16) {
    tensor_cores::launch_backward(stream, shape, grads, dout, in, lse, scratch,
                                  scratch + tensor_core_copies_offset(shape));
    return true;
  }
  const Upstream up{dout, lse, scratch};
  const Problem problem = problem_of(shape, in);
  if (shape.head_dim == 64)
    launch_backward<64>(stream, shape, grads, problem, up);
  else
    launch_backward<128>(stream, shape, grads, problem, up);
  return true;
}

}  // namespace strata::flash::cuda
