#include "kernels/cuda/cross_entropy.hpp"

#include <algorithm>
#include <cstdint>

// Launch shapes and reduction orders (they depend only on rows and width):
// - forward_chunk and backward_chunk: one 512-thread block per row, grid min(rows, 65535), further
//   rows in a block-stride loop. Thread i takes columns 4i..4i+3, then 4(i + 512).., in that order,
//   as one float4 load when the rows are 16-byte aligned and as scalar loads otherwise; the order
//   is the same either way, so the bits do not depend on alignment. Block reductions: an xor
//   butterfly in each warp, then every warp runs one more butterfly over the 16 warp partials, so
//   all threads hold the same bits. The max is reduced first, then the sum of exp(x - new max).
// - finish: pointwise, 256 threads, grid min(ceil(rows / 256), 4096), grid-stride.

namespace strata::cuda {

namespace {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowThreads = 512;
constexpr int kRowWarps = kRowThreads / kWarpSize;
constexpr std::int64_t kMaxRowBlocks = 65535;
constexpr int kPointwiseThreads = 256;
constexpr std::int64_t kMaxPointwiseBlocks = 4096;

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename Combine>
__device__ float warp_reduce(float value, Combine combine) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = combine(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// Every thread of the block gets the same result; `partials` is free again on return.
template <typename Combine>
__device__ float block_reduce(float value, float identity, float* partials, Combine combine) {
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);
  value = warp_reduce(value, combine);
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  value = warp_reduce(lane < kRowWarps ? partials[lane] : identity, combine);
  __syncthreads();
  return value;
}

// Columns base..base+3 of `row`; those at or past `limit` read as 0 (callers skip them).
__device__ float4 load_quad(const float* row, std::int64_t base, std::int64_t limit, bool vectorized) {
  if (vectorized && base + 4 <= limit) return *reinterpret_cast<const float4*>(row + base);
  float4 quad = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (base < limit) quad.x = row[base];
  if (base + 1 < limit) quad.y = row[base + 1];
  if (base + 2 < limit) quad.z = row[base + 2];
  if (base + 3 < limit) quad.w = row[base + 3];
  return quad;
}

__device__ std::int64_t first_column() {
  return 4 * static_cast<std::int64_t>(threadIdx.x);
}
constexpr std::int64_t kColumnStep = 4 * kRowThreads;

__global__ void cross_entropy_forward_chunk_kernel(float* running_max, float* running_sum, float* target_logits,
                                                   const float* logits, const std::int32_t* targets, std::int64_t rows,
                                                   std::int64_t first, std::int64_t width, std::int64_t valid,
                                                   bool vectorized) {
  __shared__ float partials[kRowWarps];
  for (std::int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const float* row = logits + n * width;
    // Read by every thread before the reductions' barriers; thread 0 overwrites it after them.
    const float previous_max = first == 0 ? 0.0f : running_max[n];
    float local_max = -INFINITY;
    for (std::int64_t base = first_column(); base < valid; base += kColumnStep) {
      const float4 quad = load_quad(row, base, valid, vectorized);
      const float x[4] = {quad.x, quad.y, quad.z, quad.w};
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (base + c < valid) local_max = fmaxf(local_max, x[c]);
    }
    const float chunk_max = block_reduce(local_max, -INFINITY, partials, Max{});
    // The first chunk starts the running values; later ones take std::max(previous, chunk).
    const float max_value = first == 0 ? chunk_max : (previous_max < chunk_max ? chunk_max : previous_max);
    float local_sum = 0.0f;
    for (std::int64_t base = first_column(); base < valid; base += kColumnStep) {
      const float4 quad = load_quad(row, base, valid, vectorized);
      const float x[4] = {quad.x, quad.y, quad.z, quad.w};
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (base + c < valid) local_sum += expf(x[c] - max_value);
    }
    const float sum = block_reduce(local_sum, 0.0f, partials, Sum{});
    if (threadIdx.x == 0) {
      running_sum[n] = first == 0 ? sum : running_sum[n] * expf(previous_max - max_value) + sum;
      running_max[n] = max_value;
      const std::int64_t target = targets[n];
      if (target >= first && target < first + valid) target_logits[n] = row[target - first];
    }
  }
}

// No __restrict__: running_max may alias logsumexp and running_sum may alias losses; each thread
// reads its row's values before it writes them.
__global__ void cross_entropy_finish_kernel(float* losses, float* logsumexp, const float* running_max,
                                            const float* running_sum, const float* target_logits,
                                            const std::int32_t* targets, std::int64_t rows) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n < rows; n += step) {
    const float lse = running_max[n] + logf(running_sum[n]);
    const float target_logit = target_logits[n];
    logsumexp[n] = lse;
    losses[n] = targets[n] < 0 ? 0.0f : lse - target_logit;  // a negative target: no target, no loss
  }
}

// dlogits may alias logits: each thread reads its columns before it writes them.
__global__ void cross_entropy_backward_chunk_kernel(float* dlogits, const float* logits, const float* logsumexp,
                                                    const std::int32_t* targets, float dloss, std::int64_t rows,
                                                    std::int64_t first, std::int64_t width, std::int64_t valid,
                                                    bool vectorized) {
  for (std::int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const float* row = logits + n * width;
    float* drow = dlogits + n * width;
    const float lse = logsumexp[n];
    const std::int64_t target_column = static_cast<std::int64_t>(targets[n]) - first;  // live when in [0, valid)
    const bool has_target = targets[n] >= 0;  // a negative target: no target, dlogits 0
    for (std::int64_t base = first_column(); base < width; base += kColumnStep) {
      const float4 quad = load_quad(row, base, valid, vectorized);
      const float x[4] = {quad.x, quad.y, quad.z, quad.w};
      float d[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const std::int64_t column = base + c;
        d[c] = 0.0f;  // padding
        if (column < valid && has_target) {
          // exp(x - lse) * dloss, then minus dloss at the target, as two roundings like the CPU
          // code (__fmul_rn keeps the compiler from fusing them into one fma).
          d[c] = __fmul_rn(expf(x[c] - lse), dloss);
          if (column == target_column) d[c] -= dloss;
        }
      }
      if (vectorized && base + 4 <= width) {
        *reinterpret_cast<float4*>(drow + base) = make_float4(d[0], d[1], d[2], d[3]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (base + c < width) drow[base + c] = d[c];
      }
    }
  }
}

bool aligned16(const void* pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

unsigned row_grid(std::int64_t rows) {
  return static_cast<unsigned>(std::min(rows, kMaxRowBlocks));
}

}  // namespace

void cross_entropy_forward_chunk(cudaStream_t stream, float* running_max, float* running_sum, float* target_logits,
                                 const float* logits, const std::int32_t* targets, std::int64_t rows,
                                 std::int64_t first, std::int64_t width, std::int64_t vocab) {
  const std::int64_t valid = std::clamp<std::int64_t>(vocab - first, 0, width);  // the rest is padding
  if (rows <= 0 || valid <= 0) return;
  const bool vectorized = width % 4 == 0 && aligned16(logits);
  cross_entropy_forward_chunk_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(
      running_max, running_sum, target_logits, logits, targets, rows, first, width, valid, vectorized);
}

void cross_entropy_finish(cudaStream_t stream, float* losses, float* logsumexp, const float* running_max,
                          const float* running_sum, const float* target_logits, const std::int32_t* targets,
                          std::int64_t rows) {
  if (rows <= 0) return;
  const std::int64_t blocks = std::min((rows + kPointwiseThreads - 1) / kPointwiseThreads, kMaxPointwiseBlocks);
  cross_entropy_finish_kernel<<<static_cast<unsigned>(blocks), kPointwiseThreads, 0, stream>>>(
      losses, logsumexp, running_max, running_sum, target_logits, targets, rows);
}

void cross_entropy_backward_chunk(cudaStream_t stream, float* dlogits, const float* logits, const float* logsumexp,
                                  const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                  std::int64_t width, std::int64_t vocab) {
  const std::int64_t valid = std::clamp<std::int64_t>(vocab - first, 0, width);
  if (rows <= 0 || width <= 0) return;
  const bool vectorized = width % 4 == 0 && aligned16(logits) && aligned16(dlogits);
  cross_entropy_backward_chunk_kernel<<<row_grid(rows), kRowThreads, 0, stream>>>(
      dlogits, logits, logsumexp, targets, dloss, rows, first, width, valid, vectorized);
}

}  // namespace strata::cuda
