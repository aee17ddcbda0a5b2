#include "cuda/flash_attention_tensor_cores.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "cuda/flash_attention_launch.cuh"

// Launch shapes and reduction orders (they depend only on the attention shape):
// - Every kernel runs 4 warps (128 threads) over a 64-row tile; warp w owns rows 16w .. 16w+15 of
//   it. Products are PTX mma.sync m16n8k16 (bf16 operands, f32 accumulators), each 16-deep step's
//   sum by the tensor core, the steps in order.
// - Score tiles never leave registers (as in FlashAttention-2): a warp's 16 x 64 scores are eight
//   m16n8 accumulators, and lane (g = lane / 4, t = lane % 4) holds rows g and g + 8, columns
//   8j + 2t and 8j + 2t + 1. That layout is also the A operand's of the next product, so P and dS
//   go from accumulators to operands by rounding pairs to bf16. A row's statistics are summed over
//   its four lanes by xor shuffles (1, then 2), which give all four the same bits.
// - forward: grid (ceil(T/64), n_head, B), one block per query tile, the last tiles (the most keys)
//   first; key tiles 0..qt in order.
// - backward_kv: grid (ceil(T/64), n_kv_head, B), one block per key tile; the group's query heads
//   in head order, and inside, query tiles qt >= kt in order; dK and dV accumulate in registers.
// - backward_q: grid (ceil(T/64), n_head, B), one block per query tile, key tiles 0..qt in order.

namespace strata::flash::cuda::tensor_cores {

namespace {

using Bf16 = __nv_bfloat16;
using launching::launch;
using launching::Problem;
using launching::problem_of;
using launching::score_gradient;
using launching::tiles;
using launching::visible;

constexpr int kTile = launching::kTile;  // query rows and key columns per tile
constexpr int kWarps = 4;
constexpr int kWarpSize = 32;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kWarpRows = 16;                  // an m16n8k16 product's rows
constexpr int kColumnBlocks = kTile / 8;       // a 64-column score tile as eight n8 accumulators
constexpr float kLog2e = 1.4426950408889634f;  // scores are exponentiated as powers of two
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFullMask = 0xffffffffu;

// A bf16 row tile [64][D + 8] in shared memory: 16 bytes of padding put the eight rows that one
// fragment load or ldmatrix phase reads in eight different 4-bank groups.
template <int D>
constexpr int kLd = D + 8;
template <int D>
constexpr int kTileBytes = kTile* kLd<D> * 2;

// Where a lane's fragment elements sit: rows g and g + 8 of a 16-row block, columns 2t, 2t + 1
// (and 2t + 8, 2t + 9 in the A operand's second half).
struct Lane {
  int g, t;
  __device__ Lane() : g(static_cast<int>(threadIdx.x % kWarpSize) / 4), t(static_cast<int>(threadIdx.x % 4)) {}
};

// d += a · b: a 16 x 16 (row-major fragment), b 16 x 8 (column-major fragment), bf16 pairs.
__device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to a bf16 pair, the first in the low half (the lower column).
__device__ __forceinline__ std::uint32_t pack(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

__device__ __forceinline__ std::uint32_t pair_at(const Bf16* tile, int row, int column, int ld) {
  return *reinterpret_cast<const std::uint32_t*>(tile + row * ld + column);
}

// The A operand of rows first_row .. + 15, depth columns 16k .. 16k + 15, of a bf16 row tile.
template <int D>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const Bf16* tile, int first_row, int k, Lane lane) {
  const int row = first_row + lane.g, column = 16 * k + 2 * lane.t;
  a[0] = pair_at(tile, row, column, kLd<D>);
  a[1] = pair_at(tile, row + 8, column, kLd<D>);
  a[2] = pair_at(tile, row, column + 8, kLd<D>);
  a[3] = pair_at(tile, row + 8, column + 8, kLd<D>);
}

// scores[j] (16 x 8 each) = rows[16][D] · cols[8j .. 8j + 7][D]^T for j < 8: the rows of one
// tile against the 64 rows of another, the depth in 16-wide steps in order.
template <int D>
__device__ __forceinline__ void scores_of(float (&scores)[kColumnBlocks][4], const Bf16* rows_tile, int first_row,
                                          const Bf16* cols_tile, Lane lane) {
#pragma unroll
  for (int j = 0; j < kColumnBlocks; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) scores[j][e] = 0.0f;
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
    std::uint32_t a[4];
    load_a<D>(a, rows_tile, first_row, k, lane);
#pragma unroll
    for (int j = 0; j < kColumnBlocks; ++j) {
      const int row = 8 * j + lane.g, column = 16 * k + 2 * lane.t;
      mma(scores[j], a, pair_at(cols_tile, row, column, kLd<D>), pair_at(cols_tile, row, column + 8, kLd<D>));
    }
  }
}

// acc[n] (16 x 8, columns 8n ..) += probabilities[16][64] · right[64][D], where the left operand is
// a score-shaped accumulator set rounded to bf16 and right a bf16 row tile, read transposed by
// ldmatrix (each 8 x 8 matrix's rows are 16 contiguous bytes of a tile row).
template <int D>
__device__ __forceinline__ void accumulate_product(float (&acc)[D / 8][4], const float (&left)[kColumnBlocks][4],
                                                   const Bf16* right) {
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
#pragma unroll
  for (int k = 0; k < kTile / 16; ++k) {
    const std::uint32_t a[4] = {pack(left[2 * k][0], left[2 * k][1]), pack(left[2 * k][2], left[2 * k][3]),
                                pack(left[2 * k + 1][0], left[2 * k + 1][1]),
                                pack(left[2 * k + 1][2], left[2 * k + 1][3])};
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      // Lanes 8i .. 8i + 7 address matrix i: rows 16k + 8 (i % 2) + lane % 8, columns 8 (n + i / 2) ...
      const int row = 16 * k + 8 * ((lane / 8) % 2) + lane % 8, column = 8 * (n + lane / 16);
      const auto address = static_cast<unsigned>(__cvta_generic_to_shared(right + row * kLd<D> + column));
      std::uint32_t b[4];
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
                   : "r"(address));
      mma(acc[n], a, b[0], b[1]);
      mma(acc[n + 1], a, b[2], b[3]);
    }
  }
}

// dst[0..3] = src[0..3] rounded to bf16 (nearest even); `vector`: src is 16-byte aligned.
__device__ __forceinline__ void round_four(Bf16* dst, const float* src, bool vector) {
  const float4 x = vector ? *reinterpret_cast<const float4*>(src) : make_float4(src[0], src[1], src[2], src[3]);
  auto* pair = reinterpret_cast<__nv_bfloat162*>(dst);
  pair[0] = __floats2bfloat162_rn(x.x, x.y);
  pair[1] = __floats2bfloat162_rn(x.z, x.w);
}

// dst[r][d] (row length D + 8) = bf16 of src row first_row + r, for r < 64; rows >= limit are 0.
template <int D>
__device__ void load_tile(Bf16* dst, const float* src, std::int64_t stride, int first_row, int limit, bool vector) {
  constexpr int kQuads = D / 4;
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * kQuads; idx += kThreads) {
    const int r = idx / kQuads, c = (idx % kQuads) * 4;
    const int row = first_row + r;
    if (row < limit)
      round_four(dst + r * kLd<D> + c, src + static_cast<std::int64_t>(row) * stride + c, vector);
    else
      *reinterpret_cast<uint2*>(dst + r * kLd<D> + c) = make_uint2(0, 0);  // bf16 zeros
  }
}

// A row statistic summed or maximised over the four lanes that hold the row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullMask, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFullMask, x, 1);
  return x + __shfl_xor_sync(kFullMask, x, 2);
}

// target[row][c] += acc (this warp's 16 rows from first_row, D columns); rows at or past `limit`
// are left alone. Each element is added to by one lane.
template <int D>
__device__ void add_rows(float* target, std::int64_t stride, int first_row, int limit, const float (&acc)[D / 8][4],
                         Lane lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = first_row + lane.g + 8 * half;
    if (row >= limit) continue;
    float* dst = target + static_cast<std::int64_t>(row) * stride + 2 * lane.t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      dst[8 * n] += acc[n][2 * half];
      dst[8 * n + 1] += acc[n][2 * half + 1];
    }
  }
}

// out (B, T, n_head, D); lse (B, n_head, T) = row max + log(row sum) of the scaled scores.
template <int D>
__global__ void __launch_bounds__(kThreads) forward_kernel(float* out, float* lse, const Problem problem) {
  extern __shared__ __align__(128) unsigned char shared[];
  Bf16* q_s = reinterpret_cast<Bf16*>(shared);
  Bf16* k_s = q_s + kTile * kLd<D>;
  Bf16* v_s = k_s + kTile * kLd<D>;
  const Lane lane;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int T = problem.seq_len;
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z), kv_head = h / problem.group;
  const int first = qt * kTile;
  const float* q_rows = problem.q + static_cast<std::int64_t>(b) * T * problem.q_stride + h * D;
  const float* k_rows = problem.k + static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  const float* v_rows = problem.v + static_cast<std::int64_t>(b) * T * problem.kv_stride + kv_head * D;
  load_tile<D>(q_s, q_rows, problem.q_stride, first, T, problem.vector_loads);

  const int row[2] = {first + warp * kWarpRows + lane.g, first + warp * kWarpRows + lane.g + 8};
  const float scale_log2 = problem.scale * kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // in powers of two, per row (g, g + 8)
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  for (int kt = 0; kt <= qt; ++kt) {
    __syncthreads();  // the previous tile's k_s and v_s are no longer read (and q_s is loaded)
    load_tile<D>(k_s, k_rows, problem.kv_stride, kt * kTile, T, problem.vector_loads);
    load_tile<D>(v_s, v_rows, problem.kv_stride, kt * kTile, T, problem.vector_loads);
    __syncthreads();
    float s[kColumnBlocks][4];
    scores_of<D>(s, q_s, warp * kWarpRows, k_s, lane);

    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kColumnBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kt * kTile + 8 * j + 2 * lane.t + e % 2;
        s[j][e] = (kt < qt || key <= row[e / 2]) && visible(key, row[e / 2], problem.window) ? s[j][e] * scale_log2
                                                                                             : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
      }
    float alpha[2], part[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      // Without a window key 0 (first tile) is visible to every row, so the new maximum is finite;
      // under one it is -inf until the row's first visible tile (launch.cuh, visible).
      const float m_new = fmaxf(m[i], quad_max(tile_max[i]));
      alpha[i] = m_new != -INFINITY ? exp2f(m[i] - m_new) : 1.0f;
      m[i] = m_new;
    }
#pragma unroll
    for (int j = 0; j < kColumnBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = m[e / 2] != -INFINITY ? exp2f(s[j][e] - m[e / 2]) : 0.0f;
        part[e / 2] += s[j][e];
      }
#pragma unroll
    for (int i = 0; i < 2; ++i) l[i] = l[i] * alpha[i] + quad_sum(part[i]);
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
    accumulate_product<D>(o, s, v_s);
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (row[i] >= T) continue;
    float* dst = out + ((static_cast<std::int64_t>(b) * T + row[i]) * problem.n_head + h) * D + 2 * lane.t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      dst[8 * n] = o[n][2 * i] / l[i];
      dst[8 * n + 1] = o[n][2 * i + 1] / l[i];
    }
    if (lane.t == 0)
      lse[(static_cast<std::int64_t>(b) * problem.n_head + h) * T + row[i]] = (m[i] + log2f(l[i])) * kLn2;
  }
}

// --- backward. The operands are rounded to bf16 once, into contiguous copies (the scratch), and
// the kernels copy their tiles from there into shared memory with cp.async: the next tile's copy
// is in flight while the current one is worked on (two buffers).

// The backward's operands: the bf16 copies of q and dout (N, n_head, D) and of k and v
// (N, n_kv_head, D), and per score row (B, n_head, T) the log-sum-exp and delta.
struct Copies {
  const Bf16* q;
  const Bf16* k;
  const Bf16* v;
  const Bf16* dout;
  const float* lse;
  const float* delta;
  int seq_len, n_head, group;
  float scale;
  int window;  // Problem::window
};

// dst (rows, width), contiguous, = src rows `stride` floats apart rounded to bf16 (nearest even);
// width is a multiple of 4, and `vector` says src's rows start 16-byte aligned.
__global__ void round_rows_kernel(Bf16* dst, const float* src, std::int64_t stride, std::int64_t rows, int width,
                                  bool vector) {
  const int quads = width / 4;
  const std::int64_t count = rows * quads;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / quads;
    const int c = static_cast<int>(i % quads) * 4;
    round_four(dst + r * width + c, src + r * stride + c, vector);
  }
}

void round_rows(cudaStream_t stream, Bf16* dst, const float* src, std::int64_t stride, std::int64_t rows, int width,
                bool vector) {
  const std::int64_t quads = rows * (width / 4);
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((quads + 255) / 256, 4096));
  if (quads > 0) round_rows_kernel<<<blocks, 256, 0, stream>>>(dst, src, stride, rows, width, vector);
}

// Asynchronous copies of 16 bytes (bypassing L1) and of 4, from global to shared memory.
__device__ __forceinline__ void copy_async_16(void* shared_destination, const void* source) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(source));
}
__device__ __forceinline__ void copy_async_4(void* shared_destination, const void* source) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(address), "l"(source));
}
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most `pending` of this thread's committed copy groups are still in flight.
template <int pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
}

// dst[r][d] (row length D + 8) = row first_row + r of a contiguous bf16 copy, for r < 64; rows >=
// limit are 0. Asynchronous: visible after wait_copies and a barrier.
template <int D>
__device__ void copy_tile(Bf16* dst, const Bf16* src, std::int64_t stride, int first_row, int limit) {
  constexpr int kChunks = D / 8;  // 16 bytes each
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8;
    const int row = first_row + r;
    Bf16* d = dst + r * kLd<D> + c;
    if (row < limit)
      copy_async_16(d, src + static_cast<std::int64_t>(row) * stride + c);
    else
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
  }
}

// The row statistics of query tile qt of head h (rows past T read as 0), asynchronously.
__device__ void copy_statistics(float* lse_s, float* delta_s, const Copies& op, int b, int h, int qt) {
  if (threadIdx.x >= kTile) return;
  const int row = qt * kTile + static_cast<int>(threadIdx.x);
  if (row < op.seq_len) {
    const std::int64_t stat = (static_cast<std::int64_t>(b) * op.n_head + h) * op.seq_len + row;
    copy_async_4(lse_s + threadIdx.x, op.lse + stat);
    copy_async_4(delta_s + threadIdx.x, op.delta + stat);
  } else {
    lse_s[threadIdx.x] = 0.0f;
    delta_s[threadIdx.x] = 0.0f;
  }
}

// Shared memory: backward_kv's k and v tiles, then two buffers of a q and a dout tile, then two
// of the row statistics (64 lse, 64 delta); backward_q's q and dout tiles, then two buffers of a k
// and a v tile.
template <int D>
constexpr int kBackwardBytes = 6 * kTileBytes<D> + 2 * 2 * kTile * 4;

// dk, dv += the gradients of key tile kt of kv head blockIdx.y, summed over the group's query
// heads in head order and over query tiles in order. The scores are computed transposed: a warp's
// rows are its 16 keys, its columns the tile's 64 queries.
template <int D>
__global__ void __launch_bounds__(kThreads)
    backward_kv_kernel(float* dk, float* dv, std::int64_t dkv_stride, const Copies op) {
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kTileElements = kTile * kLd<D>;
  Bf16* k_s = reinterpret_cast<Bf16*>(shared);
  Bf16* v_s = k_s + kTileElements;
  Bf16* buffers = v_s + kTileElements;  // buffer i: q at 2i, dout at 2i + 1 tiles from here
  float* statistics = reinterpret_cast<float*>(shared + 6 * kTileBytes<D>);  // buffer i: lse, delta at 2i, 2i + 1
  const Lane lane;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int T = op.seq_len, n_tiles = static_cast<int>(gridDim.x);
  const int kt = static_cast<int>(blockIdx.x), kv_head = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const std::int64_t kv_stride = static_cast<std::int64_t>(op.n_head / op.group) * D;
  const std::int64_t q_stride = static_cast<std::int64_t>(op.n_head) * D;
  copy_tile<D>(k_s, op.k + static_cast<std::int64_t>(b) * T * kv_stride + kv_head * D, kv_stride, kt * kTile, T);
  copy_tile<D>(v_s, op.v + static_cast<std::int64_t>(b) * T * kv_stride + kv_head * D, kv_stride, kt * kTile, T);
  // Step s works on query head kv_head * group + s / per_head, query tile kt + s % per_head.
  const int per_head = n_tiles - kt, steps = op.group * per_head;
  const auto issue = [&](int step) {
    const int h = kv_head * op.group + step / per_head, qt = kt + step % per_head;
    Bf16* q_buffer = buffers + (step % 2) * 2 * kTileElements;
    const std::int64_t offset = static_cast<std::int64_t>(b) * T * q_stride + h * D;
    copy_tile<D>(q_buffer, op.q + offset, q_stride, qt * kTile, T);
    copy_tile<D>(q_buffer + kTileElements, op.dout + offset, q_stride, qt * kTile, T);
    float* stats = statistics + (step % 2) * 2 * kTile;
    copy_statistics(stats, stats + kTile, op, b, h, qt);
    commit_copies();
  };
  issue(0);  // k and v ride in the first group

  const int key[2] = {kt * kTile + warp * kWarpRows + lane.g, kt * kTile + warp * kWarpRows + lane.g + 8};
  const float scale_log2 = op.scale * kLog2e;
  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.0f;
  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) {
      issue(step + 1);
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();  // this step's tiles have landed, for every thread
    const int qt = kt + step % per_head;
    const Bf16* q_s = buffers + (step % 2) * 2 * kTileElements;
    const Bf16* do_s = q_s + kTileElements;
    const float* lse_s = statistics + (step % 2) * 2 * kTile;
    const float* delta_s = lse_s + kTile;
    float p[kColumnBlocks][4], ds[kColumnBlocks][4];
    scores_of<D>(p, k_s, warp * kWarpRows, q_s, lane);    // S^T
    scores_of<D>(ds, v_s, warp * kWarpRows, do_s, lane);  // dP^T
#pragma unroll
    for (int j = 0; j < kColumnBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int column = 8 * j + 2 * lane.t + e % 2, query = qt * kTile + column;
        p[j][e] = visible(key[e / 2], query, op.window) && query < T
                      ? exp2f(p[j][e] * scale_log2 - lse_s[column] * kLog2e)
                      : 0.0f;
        ds[j][e] = score_gradient(p[j][e], ds[j][e], delta_s[column], op.scale);
      }
    accumulate_product<D>(dv_acc, p, do_s);  // dV += P^T dO
    accumulate_product<D>(dk_acc, ds, q_s);  // dK += dS^T Q
    __syncthreads();                         // this step's buffer is refilled two steps on
  }

  const std::int64_t column = static_cast<std::int64_t>(b) * T * dkv_stride + kv_head * D;
  const int first_key = kt * kTile + warp * kWarpRows;
  add_rows<D>(dk + column, dkv_stride, first_key, T, dk_acc, lane);
  add_rows<D>(dv + column, dkv_stride, first_key, T, dv_acc, lane);
}

// dq += the gradient of query tile qt of head blockIdx.y, key tiles in order.
template <int D>
__global__ void __launch_bounds__(kThreads) backward_q_kernel(float* dq, std::int64_t dq_stride, const Copies op) {
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kTileElements = kTile * kLd<D>;
  Bf16* q_s = reinterpret_cast<Bf16*>(shared);
  Bf16* do_s = q_s + kTileElements;
  Bf16* buffers = do_s + kTileElements;  // buffer i: k at 2i, v at 2i + 1 tiles from here
  const Lane lane;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int T = op.seq_len;
  const int qt = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z), kv_head = h / op.group;
  const std::int64_t kv_stride = static_cast<std::int64_t>(op.n_head / op.group) * D;
  const std::int64_t q_stride = static_cast<std::int64_t>(op.n_head) * D;
  const std::int64_t q_offset = static_cast<std::int64_t>(b) * T * q_stride + h * D;
  const std::int64_t kv_offset = static_cast<std::int64_t>(b) * T * kv_stride + kv_head * D;
  copy_tile<D>(q_s, op.q + q_offset, q_stride, qt * kTile, T);
  copy_tile<D>(do_s, op.dout + q_offset, q_stride, qt * kTile, T);
  const auto issue = [&](int kt) {
    Bf16* k_buffer = buffers + (kt % 2) * 2 * kTileElements;
    copy_tile<D>(k_buffer, op.k + kv_offset, kv_stride, kt * kTile, T);
    copy_tile<D>(k_buffer + kTileElements, op.v + kv_offset, kv_stride, kt * kTile, T);
    commit_copies();
  };
  issue(0);  // q and dout ride in the first group

  const int row[2] = {qt * kTile + warp * kWarpRows + lane.g, qt * kTile + warp * kWarpRows + lane.g + 8};
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const std::int64_t stat = (static_cast<std::int64_t>(b) * op.n_head + h) * T + row[i];
    row_lse[i] = row[i] < T ? op.lse[stat] * kLog2e : 0.0f;
    row_delta[i] = row[i] < T ? op.delta[stat] : 0.0f;
  }
  const float scale_log2 = op.scale * kLog2e;
  float dq_acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dq_acc[n][e] = 0.0f;
  for (int kt = 0; kt <= qt; ++kt) {
    if (kt < qt) {
      issue(kt + 1);
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();  // this tile's k and v have landed, for every thread
    const Bf16* k_s = buffers + (kt % 2) * 2 * kTileElements;
    const Bf16* v_s = k_s + kTileElements;
    float s[kColumnBlocks][4], ds[kColumnBlocks][4];
    scores_of<D>(s, q_s, warp * kWarpRows, k_s, lane);
    scores_of<D>(ds, do_s, warp * kWarpRows, v_s, lane);  // dP
#pragma unroll
    for (int j = 0; j < kColumnBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = e / 2, key = kt * kTile + 8 * j + 2 * lane.t + e % 2;
        const float p = visible(key, row[i], op.window) && row[i] < T ? exp2f(s[j][e] * scale_log2 - row_lse[i]) : 0.0f;
        ds[j][e] = score_gradient(p, ds[j][e], row_delta[i], op.scale);
      }
    accumulate_product<D>(dq_acc, ds, k_s);  // dQ += dS K
    __syncthreads();                         // this tile's buffer is refilled two tiles on
  }

  add_rows<D>(dq + static_cast<std::int64_t>(b) * T * dq_stride + h * D, dq_stride, qt * kTile + warp * kWarpRows, T,
              dq_acc, lane);
}

template <int D>
void forward_for(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse, const AttentionInputs& in) {
  const dim3 grid(tiles(shape), static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.batch));
  launch(forward_kernel<D>, grid, kThreads, 3 * kTileBytes<D>, stream, out, lse, problem_of(shape, in));
}

template <int D>
void backward_for(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const Copies& op) {
  const dim3 kv_grid(tiles(shape), static_cast<unsigned>(shape.n_kv_head), static_cast<unsigned>(shape.batch));
  launch(backward_kv_kernel<D>, kv_grid, kThreads, kBackwardBytes<D>, stream, grads.dk, grads.dv, grads.kv_stride, op);
  const dim3 q_grid(tiles(shape), static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.batch));
  launch(backward_q_kernel<D>, q_grid, kThreads, 6 * kTileBytes<D>, stream, grads.dq, grads.q_stride, op);
}

}  // namespace

int shared_bytes(int head_dim) {
  return head_dim == 64 ? kBackwardBytes<64> : kBackwardBytes<128>;  // the larger of the three
}

void launch_forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse,
                    const AttentionInputs& in) {
  if (shape.head_dim == 64)
    forward_for<64>(stream, shape, out, lse, in);
  else
    forward_for<128>(stream, shape, out, lse, in);
}

void launch_backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                     const AttentionInputs& in, const float* lse, const float* delta, float* copies) {
  const Problem problem = problem_of(shape, in);
  const std::int64_t rows = static_cast<std::int64_t>(shape.batch) * shape.seq_len;
  const int q_width = shape.n_head * shape.head_dim, kv_width = shape.n_kv_head * shape.head_dim;
  auto* q = reinterpret_cast<Bf16*>(copies);
  Bf16* k = q + rows * q_width;
  Bf16* v = k + rows * kv_width;
  Bf16* d = v + rows * kv_width;
  round_rows(stream, q, in.q, in.q_stride, rows, q_width, problem.vector_loads);
  round_rows(stream, k, in.k, in.kv_stride, rows, kv_width, problem.vector_loads);
  round_rows(stream, v, in.v, in.kv_stride, rows, kv_width, problem.vector_loads);
  // dout is the model's own contiguous (N, n_head * D) buffer: always 16-byte aligned rows.
  round_rows(stream, d, dout, q_width, rows, q_width, true);
  const Copies op{
      q, k, v, d, lse, delta, problem.seq_len, problem.n_head, problem.group, problem.scale, problem.window};
  if (shape.head_dim == 64)
    backward_for<64>(stream, shape, grads, op);
  else
    backward_for<128>(stream, shape, grads, op);
}

}  // namespace strata::flash::cuda::tensor_cores
