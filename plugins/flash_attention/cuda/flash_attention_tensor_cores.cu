#include "plugins/flash_attention/cuda/flash_attention_tensor_cores.hpp"

#include <cmath>

#include <cuda_bf16.h>
#include <mma.h>

#include "plugins/flash_attention/cuda/flash_attention_launch.cuh"

// Launch shapes and reduction orders (they depend only on the attention shape):
// - Every kernel runs 4 warps (128 threads) over a 64-row tile; warp w owns rows 16w .. 16w+15 of
//   it, one WMMA tile high. Products go through WMMA fragments; a product's depth is summed in 16
//   steps in order, each step's 16-deep sum by the tensor core.
// - Score tiles are stored to the warp's shared memory as f32 and worked on element-wise by its
//   lanes: lane (r = lane % 16, half = lane / 16) owns row r and columns half*4 + 8j .. + 3 for
//   j < 8 (float4 accesses that hit 32 different banks).
// - forward: grid (ceil(T/64), n_head, B), one block per query tile, the last tiles (the most keys)
//   first; key tiles 0..qt in order. The output accumulator lives in the warp's shared memory,
//   rescaled by its lanes and loaded into a fragment for each P·V product.
// - backward_kv: grid (ceil(T/64), n_kv_head, B), one block per key tile; the group's query heads
//   in head order, and inside, query tiles qt >= kt in order; dK and dV accumulate in fragments.
// - backward_q: grid (ceil(T/64), n_head, B), one block per query tile, key tiles 0..qt in order.

namespace strata::flash::cuda::tensor_cores {

namespace {

using namespace nvcuda;
using Bf16 = __nv_bfloat16;
using launching::launch;
using launching::Problem;
using launching::problem_of;
using launching::score_gradient;
using launching::tiles;
using launching::Upstream;

constexpr int kTile = launching::kTile;  // query rows and key columns per tile
constexpr int kWarps = 4;
constexpr int kWarpSize = 32;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kFrag = 16;                      // WMMA's m, n and k
constexpr int kLdScores = kTile + 4;           // f32 score rows: WMMA needs a multiple of 4 floats
constexpr int kLdProbabilities = kTile + 8;    // bf16 operand rows: a multiple of 8, 16 bytes of padding
constexpr float kLog2e = 1.4426950408889634f;  // scores are exponentiated as powers of two
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFullMask = 0xffffffffu;

using FragA = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, Bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, Bf16, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, Bf16, wmma::col_major>;  // a transpose
using FragAcc = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;

// Shared memory of one block, in bytes from its start; every region starts 128-byte aligned, and
// every fragment pointer into it is 32-byte aligned as WMMA requires.
template <int D>
struct Layout {
  static constexpr int kLdRows = D + 8;  // bf16 tiles [64][D + 8]
  static constexpr int kLdOut = D + 4;   // f32 output rows [16][D + 4] per warp
  static constexpr int kRowTile = kTile * kLdRows * 2;
  static constexpr int kWarpScores = kFrag * kLdScores * 4;
  static constexpr int kWarpOut = kFrag * kLdOut * 4;
  static constexpr int kWarpBf16 = kFrag * kLdProbabilities * 2;
};

// forward: q, k, v tiles; per warp its scores, its output accumulator and its probabilities.
template <int D>
struct ForwardLayout : Layout<D> {
  using L = Layout<D>;
  static constexpr int tiles = 0;
  static constexpr int scores = tiles + 3 * L::kRowTile;
  static constexpr int output = scores + kWarps * L::kWarpScores;
  static constexpr int probabilities = output + kWarps * L::kWarpOut;
  static constexpr int bytes = probabilities + kWarps * L::kWarpBf16;
};

// backward: four row tiles (the block's two and the loop's two); per warp its scores and dP
// (f32), P and dS (bf16); the loop tile's 64 row statistics twice. After the loop the score and
// dP regions become each warp's f32 [16][D + 4] output stage.
template <int D>
struct BackwardLayout : Layout<D> {
  using L = Layout<D>;
  static constexpr int tiles = 0;
  static constexpr int scores = tiles + 4 * L::kRowTile;
  static constexpr int second = scores + kWarps * L::kWarpScores;
  static constexpr int probabilities = second + kWarps * L::kWarpScores;
  static constexpr int score_grads = probabilities + kWarps * L::kWarpBf16;
  static constexpr int lse = score_grads + kWarps * L::kWarpBf16;
  static constexpr int delta = lse + kTile * 4;
  static constexpr int bytes = delta + kTile * 4;
  static_assert(2 * kWarps * L::kWarpScores >= kWarps * L::kWarpOut, "the output stage fits the score regions");
};

// One warp's view of a backward block's shared memory (BackwardLayout): the four row tiles, in
// the order its kernel names them, the warp's own score, dP, P and dS tiles, the row statistics,
// and, once the loop is over, the warp's output stage.
template <int D>
struct BackwardShared {
  using L = BackwardLayout<D>;
  __device__ BackwardShared(unsigned char* shared, int warp)
      : scores(reinterpret_cast<float*>(shared + L::scores + warp * L::kWarpScores)),
        dp(reinterpret_cast<float*>(shared + L::second + warp * L::kWarpScores)),
        p(reinterpret_cast<Bf16*>(shared + L::probabilities + warp * L::kWarpBf16)),
        ds(reinterpret_cast<Bf16*>(shared + L::score_grads + warp * L::kWarpBf16)),
        lse(reinterpret_cast<float*>(shared + L::lse)),
        delta(reinterpret_cast<float*>(shared + L::delta)),
        stage(reinterpret_cast<float*>(shared + L::scores) + warp * kFrag * L::kLdOut) {
#pragma unroll
    for (int t = 0; t < 4; ++t) tile[t] = reinterpret_cast<Bf16*>(shared + L::tiles + t * L::kRowTile);
  }
  Bf16* tile[4];
  float *scores, *dp;
  Bf16 *p, *ds;
  float *lse, *delta;
  float* stage;
};

// dst[r][d] (row length D + 8) = bf16 of src row first_row + r, for r < 64; rows >= limit are 0.
template <int D>
__device__ void load_tile(Bf16* dst, const float* src, std::int64_t stride, int first_row, int limit, bool vector) {
  constexpr int kQuads = D / 4;
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * kQuads; idx += kThreads) {
    const int r = idx / kQuads, c = (idx % kQuads) * 4;
    const int row = first_row + r;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < limit) {
      const float* p = src + static_cast<std::int64_t>(row) * stride + c;
      x = vector ? *reinterpret_cast<const float4*>(p) : make_float4(p[0], p[1], p[2], p[3]);
    }
    auto* pair = reinterpret_cast<__nv_bfloat162*>(dst + r * Layout<D>::kLdRows + c);
    pair[0] = __floats2bfloat162_rn(x.x, x.y);
    pair[1] = __floats2bfloat162_rn(x.z, x.w);
  }
}

// scores[16][64] (f32, this warp's) = rows[16][D] · cols[64][D]^T, both bf16 tiles in shared memory;
// the rows' fragments are loaded once for the four column blocks.
template <int D>
__device__ __forceinline__ void product_transposed(float* scores, const Bf16* rows, const Bf16* cols) {
  constexpr int ld = Layout<D>::kLdRows;
  FragA a[D / kFrag];
#pragma unroll
  for (int k = 0; k < D / kFrag; ++k) wmma::load_matrix_sync(a[k], rows + k * kFrag, ld);
#pragma unroll
  for (int n = 0; n < kTile / kFrag; ++n) {
    FragAcc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < D / kFrag; ++k) {
      FragBt b;
      wmma::load_matrix_sync(b, cols + n * kFrag * ld + k * kFrag, ld);
      wmma::mma_sync(acc, a[k], b, acc);
    }
    wmma::store_matrix_sync(scores + n * kFrag, acc, kLdScores, wmma::mem_row_major);
  }
}

// acc[n] += left[16][64] (bf16, this warp's) · right[64][D] (a bf16 row tile), for n < D/16.
template <int D>
__device__ __forceinline__ void accumulate_product(FragAcc (&acc)[D / kFrag], const Bf16* left, const Bf16* right) {
  constexpr int ld = Layout<D>::kLdRows;
#pragma unroll
  for (int k = 0; k < kTile / kFrag; ++k) {
    FragA a;
    wmma::load_matrix_sync(a, left + k * kFrag, kLdProbabilities);
#pragma unroll
    for (int n = 0; n < D / kFrag; ++n) {
      FragB b;
      wmma::load_matrix_sync(b, right + k * kFrag * ld + n * kFrag, ld);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}

// The column of a lane's j-th float4 in a score row: half*4 + 8j.
__device__ __forceinline__ int lane_column(int half, int j) {
  return half * 4 + 8 * j;
}

// target[row][c] += acc (16 x D, this warp's rows), through `stage` (the warp's f32 [16][D + 4]);
// rows at or past `limit` are left alone. Each element is added to by one lane.
template <int D>
__device__ void add_rows(float* target, std::int64_t stride, int first_row, int limit, FragAcc (&acc)[D / kFrag],
                         float* stage, int lane) {
  constexpr int ld = Layout<D>::kLdOut;
#pragma unroll
  for (int n = 0; n < D / kFrag; ++n) wmma::store_matrix_sync(stage + n * kFrag, acc[n], ld, wmma::mem_row_major);
  __syncwarp();
  const int r = lane % kFrag, half = lane / kFrag, row = first_row + r;
  if (row < limit) {
    float* dst = target + static_cast<std::int64_t>(row) * stride;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int c = lane_column(half, j);
      const float4 x = *reinterpret_cast<const float4*>(stage + r * ld + c);
      dst[c] += x.x;
      dst[c + 1] += x.y;
      dst[c + 2] += x.z;
      dst[c + 3] += x.w;
    }
  }
  __syncwarp();
}

// out (B, T, n_head, D); lse (B, n_head, T) = row max + log(row sum) of the scaled scores.
template <int D>
__global__ void __launch_bounds__(kThreads) forward_kernel(float* out, float* lse, const Problem problem) {
  using L = ForwardLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  Bf16* q_s = reinterpret_cast<Bf16*>(shared + L::tiles);
  Bf16* k_s = q_s + kTile * L::kLdRows;
  Bf16* v_s = k_s + kTile * L::kLdRows;
  float* scores = reinterpret_cast<float*>(shared + L::scores + warp * L::kWarpScores);
  float* o_w = reinterpret_cast<float*>(shared + L::output + warp * L::kWarpOut);
  Bf16* p_w = reinterpret_cast<Bf16*>(shared + L::probabilities + warp * L::kWarpBf16);
  const int T = problem.seq_len;
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z), kv_head = h / problem.group;
  const int first = qt * kTile;
  const float* q_rows = problem.q + static_cast<std::int64_t>(b) * T * problem.q_stride + h * D;
  const float* k_rows = problem.k + static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  const float* v_rows = problem.v + static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  load_tile<D>(q_s, q_rows, problem.q_stride, first, T, problem.vector_loads);
  for (int i = lane; i < kFrag * L::kLdOut; i += kWarpSize) o_w[i] = 0.0f;

  const int r = lane % kFrag, half = lane / kFrag;
  const int row = first + warp * kFrag + r;
  const float scale_log2 = problem.scale * kLog2e;
  float m = -INFINITY, l = 0.0f;  // in powers of two; the two lanes of a row hold the same values
  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // the previous tile's k_s and v_s are no longer read
    load_tile<D>(k_s, k_rows, problem.kv_stride, kt * kTile, T, problem.vector_loads);
    load_tile<D>(v_s, v_rows, problem.kv_stride, kt * kTile, T, problem.vector_loads);
    __syncthreads();
    product_transposed<D>(scores, q_s + warp * kFrag * L::kLdRows, k_s);
    __syncwarp();

    float x[32];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = lane_column(half, j);
      const float4 s = *reinterpret_cast<const float4*>(scores + r * kLdScores + c);
      const float sv[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        x[4 * j + t] = kt * kTile + c + t <= row ? sv[t] * scale_log2 : -INFINITY;
        tile_max = fmaxf(tile_max, x[4 * j + t]);
      }
    }
    // Key 0 (first tile) is visible to every row, so m_new is finite.
    const float m_new = fmaxf(m, fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, kFrag)));
    const float alpha = exp2f(m - m_new);
    float part = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float p[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        p[t] = exp2f(x[4 * j + t] - m_new);
        part += p[t];
      }
      auto* pair = reinterpret_cast<__nv_bfloat162*>(p_w + r * kLdProbabilities + lane_column(half, j));
      pair[0] = __floats2bfloat162_rn(p[0], p[1]);
      pair[1] = __floats2bfloat162_rn(p[2], p[3]);
    }
    l = l * alpha + (part + __shfl_xor_sync(kFullMask, part, kFrag));
    m = m_new;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      float4* o = reinterpret_cast<float4*>(o_w + r * L::kLdOut + lane_column(half, j));
      *o = make_float4(o->x * alpha, o->y * alpha, o->z * alpha, o->w * alpha);
    }
    __syncwarp();

    FragAcc acc[D / kFrag];
#pragma unroll
    for (int n = 0; n < D / kFrag; ++n) wmma::load_matrix_sync(acc[n], o_w + n * kFrag, L::kLdOut, wmma::mem_row_major);
    accumulate_product<D>(acc, p_w, v_s);
#pragma unroll
    for (int n = 0; n < D / kFrag; ++n)
      wmma::store_matrix_sync(o_w + n * kFrag, acc[n], L::kLdOut, wmma::mem_row_major);
    __syncwarp();
  }

  if (row < T) {
    float* dst = out + ((static_cast<std::int64_t>(b) * T + row) * problem.n_head + h) * D;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int c = lane_column(half, j);
      const float4 o = *reinterpret_cast<const float4*>(o_w + r * L::kLdOut + c);
      dst[c] = o.x / l;
      dst[c + 1] = o.y / l;
      dst[c + 2] = o.z / l;
      dst[c + 3] = o.w / l;
    }
    if (half == 0) lse[(static_cast<std::int64_t>(b) * problem.n_head + h) * T + row] = (m + log2f(l)) * kLn2;
  }
}

// Loads query tile qt of head h: q and dout rows, and the row statistics (lse in powers of two).
template <int D>
__device__ void load_query_tile(Bf16* q_s, Bf16* do_s, float* lse_s, float* delta_s, const Problem& problem,
                                const Upstream& up, int b, int h, int qt) {
  const int T = problem.seq_len, first = qt * kTile;
  const std::int64_t out_stride = static_cast<std::int64_t>(problem.n_head) * D;
  load_tile<D>(q_s, problem.q + static_cast<std::int64_t>(b) * T * problem.q_stride + h * D, problem.q_stride, first, T,
               problem.vector_loads);
  // dout is the model's own contiguous (N, n_head * D) buffer: always 16-byte aligned rows.
  load_tile<D>(do_s, up.dout + static_cast<std::int64_t>(b) * T * out_stride + h * D, out_stride, first, T, true);
  if (threadIdx.x < kTile) {
    const int row = first + static_cast<int>(threadIdx.x);
    const std::int64_t stat = (static_cast<std::int64_t>(b) * problem.n_head + h) * T + row;
    lse_s[threadIdx.x] = row < T ? up.lse[stat] * kLog2e : 0.0f;
    delta_s[threadIdx.x] = row < T ? up.delta[stat] : 0.0f;
  }
}

// dk, dv += the gradients of key tile kt of kv head blockIdx.y, summed over the group's query
// heads in head order and over query tiles in order.
template <int D>
__global__ void __launch_bounds__(kThreads)
    backward_kv_kernel(float* dk, float* dv, std::int64_t dkv_stride, const Problem problem, const Upstream up) {
  using L = BackwardLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const BackwardShared<D> sm(shared, warp);
  Bf16 *k_s = sm.tile[0], *v_s = sm.tile[1], *q_s = sm.tile[2], *do_s = sm.tile[3];
  float *s_w = sm.scores, *dp_w = sm.dp;
  Bf16 *p_w = sm.p, *ds_w = sm.ds;
  const int T = problem.seq_len, n_tiles = static_cast<int>(gridDim.x);
  const int kt = static_cast<int>(blockIdx.x), kv_head = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const std::int64_t kv_offset = static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  load_tile<D>(k_s, problem.k + kv_offset, problem.kv_stride, kt * kTile, T, problem.vector_loads);
  load_tile<D>(v_s, problem.v + kv_offset, problem.kv_stride, kt * kTile, T, problem.vector_loads);

  const int r = lane % kFrag, half = lane / kFrag;
  const int key = kt * kTile + warp * kFrag + r;
  const float scale_log2 = problem.scale * kLog2e;
  FragAcc dk_acc[D / kFrag], dv_acc[D / kFrag];
#pragma unroll
  for (int n = 0; n < D / kFrag; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.0f);
    wmma::fill_fragment(dv_acc[n], 0.0f);
  }
  for (int g = 0; g < problem.group; ++g) {
    const int h = kv_head * problem.group + g;
    for (int qt = kt; qt < n_tiles; ++qt) {
      __syncthreads();  // the previous tile's operands are no longer read
      load_query_tile<D>(q_s, do_s, sm.lse, sm.delta, problem, up, b, h, qt);
      __syncthreads();
      // Transposed tiles: row r is key 16*warp + r, column c is query c of the tile.
      product_transposed<D>(s_w, k_s + warp * kFrag * L::kLdRows, q_s);
      product_transposed<D>(dp_w, v_s + warp * kFrag * L::kLdRows, do_s);
      __syncwarp();
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int c = lane_column(half, j);
        const float4 s = *reinterpret_cast<const float4*>(s_w + r * kLdScores + c);
        const float4 dp = *reinterpret_cast<const float4*>(dp_w + r * kLdScores + c);
        const float sv[4] = {s.x, s.y, s.z, s.w}, dpv[4] = {dp.x, dp.y, dp.z, dp.w};
        float p[4], ds[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int query = qt * kTile + c + t;
          p[t] = key <= query && query < T ? exp2f(sv[t] * scale_log2 - sm.lse[c + t]) : 0.0f;
          ds[t] = score_gradient(p[t], dpv[t], sm.delta[c + t], problem.scale);
        }
        auto* p_pair = reinterpret_cast<__nv_bfloat162*>(p_w + r * kLdProbabilities + c);
        p_pair[0] = __floats2bfloat162_rn(p[0], p[1]);
        p_pair[1] = __floats2bfloat162_rn(p[2], p[3]);
        auto* ds_pair = reinterpret_cast<__nv_bfloat162*>(ds_w + r * kLdProbabilities + c);
        ds_pair[0] = __floats2bfloat162_rn(ds[0], ds[1]);
        ds_pair[1] = __floats2bfloat162_rn(ds[2], ds[3]);
      }
      __syncwarp();
      accumulate_product<D>(dv_acc, p_w, do_s);  // dV += P^T dO
      accumulate_product<D>(dk_acc, ds_w, q_s);  // dK += dS^T Q
    }
  }

  __syncthreads();  // the score tiles become each warp's output stage
  const std::int64_t column = static_cast<std::int64_t>(b) * T * dkv_stride + kv_head * D;
  const int first_key = kt * kTile + warp * kFrag;
  add_rows<D>(dk + column, dkv_stride, first_key, T, dk_acc, sm.stage, lane);
  add_rows<D>(dv + column, dkv_stride, first_key, T, dv_acc, sm.stage, lane);
}

// dq += the gradient of query tile qt of head blockIdx.y, key tiles in order.
template <int D>
__global__ void __launch_bounds__(kThreads)
    backward_q_kernel(float* dq, std::int64_t dq_stride, const Problem problem, const Upstream up) {
  using L = BackwardLayout<D>;
  extern __shared__ __align__(128) unsigned char shared[];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const BackwardShared<D> sm(shared, warp);
  Bf16 *q_s = sm.tile[0], *do_s = sm.tile[1], *k_s = sm.tile[2], *v_s = sm.tile[3];
  float *s_w = sm.scores, *dp_w = sm.dp;
  Bf16* ds_w = sm.ds;
  const int T = problem.seq_len;
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z), kv_head = h / problem.group;
  const std::int64_t kv_offset = static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  load_query_tile<D>(q_s, do_s, sm.lse, sm.delta, problem, up, b, h, qt);

  const int r = lane % kFrag, half = lane / kFrag;
  const int local_row = warp * kFrag + r, row = qt * kTile + local_row;
  const float scale_log2 = problem.scale * kLog2e;
  FragAcc dq_acc[D / kFrag];
#pragma unroll
  for (int n = 0; n < D / kFrag; ++n) wmma::fill_fragment(dq_acc[n], 0.0f);
  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // the previous tile's operands are no longer read (and the query tile is loaded)
    load_tile<D>(k_s, problem.k + kv_offset, problem.kv_stride, kt * kTile, T, problem.vector_loads);
    load_tile<D>(v_s, problem.v + kv_offset, problem.kv_stride, kt * kTile, T, problem.vector_loads);
    __syncthreads();
    product_transposed<D>(s_w, q_s + warp * kFrag * L::kLdRows, k_s);
    product_transposed<D>(dp_w, do_s + warp * kFrag * L::kLdRows, v_s);
    __syncwarp();
    const float row_lse = sm.lse[local_row], row_delta = sm.delta[local_row];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = lane_column(half, j);
      const float4 s = *reinterpret_cast<const float4*>(s_w + r * kLdScores + c);
      const float4 dp = *reinterpret_cast<const float4*>(dp_w + r * kLdScores + c);
      const float sv[4] = {s.x, s.y, s.z, s.w}, dpv[4] = {dp.x, dp.y, dp.z, dp.w};
      float ds[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int key = kt * kTile + c + t;
        const float p = key <= row && row < T ? exp2f(sv[t] * scale_log2 - row_lse) : 0.0f;
        ds[t] = score_gradient(p, dpv[t], row_delta, problem.scale);
      }
      auto* pair = reinterpret_cast<__nv_bfloat162*>(ds_w + r * kLdProbabilities + c);
      pair[0] = __floats2bfloat162_rn(ds[0], ds[1]);
      pair[1] = __floats2bfloat162_rn(ds[2], ds[3]);
    }
    __syncwarp();
    accumulate_product<D>(dq_acc, ds_w, k_s);  // dQ += dS K
  }

  __syncthreads();  // the score tiles become each warp's output stage
  add_rows<D>(dq + static_cast<std::int64_t>(b) * T * dq_stride + h * D, dq_stride, qt * kTile + warp * kFrag, T,
              dq_acc, sm.stage, lane);
}

template <int D>
void forward_for(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in) {
  const dim3 grid(tiles(shape), static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.batch));
  launch(forward_kernel<D>, grid, kThreads, ForwardLayout<D>::bytes, stream, out, lse, problem_of(shape, in));
}

template <int D>
void backward_for(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const Problem& problem,
                  const Upstream& up) {
  const dim3 kv_grid(tiles(shape), static_cast<unsigned>(shape.n_kv_head), static_cast<unsigned>(shape.batch));
  launch(backward_kv_kernel<D>, kv_grid, kThreads, BackwardLayout<D>::bytes, stream, grads.dk, grads.dv,
         grads.kv_stride, problem, up);
  const dim3 q_grid(tiles(shape), static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.batch));
  launch(backward_q_kernel<D>, q_grid, kThreads, BackwardLayout<D>::bytes, stream, grads.dq, grads.q_stride, problem,
         up);
}

}  // namespace

int shared_bytes(int head_dim) {
  return head_dim == 64 ? BackwardLayout<64>::bytes : BackwardLayout<128>::bytes;  // the larger of the two
}

void launch_forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse,
                    const AttentionInputs& in) {
  if (shape.head_dim == 64)
    forward_for<64>(stream, shape, out, lse, in);
  else
    forward_for<128>(stream, shape, out, lse, in);
}

void launch_backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                     const AttentionInputs& in, const float* lse, const float* delta) {
  const Upstream up{dout, lse, delta};
  const Problem problem = problem_of(shape, in);
  if (shape.head_dim == 64)
    backward_for<64>(stream, shape, grads, problem, up);
  else
    backward_for<128>(stream, shape, grads, problem, up);
}

}  // namespace strata::flash::cuda::tensor_cores
