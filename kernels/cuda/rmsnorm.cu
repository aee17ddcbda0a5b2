// RMSNorm kernels.
//
// Forward: one warp per row, kWarpsPerBlock rows per block, grid ceil(rows / kWarpsPerBlock); the
// warp combines its 32 lane sums with a fixed xor butterfly.
//
// Backward, two kernels:
//   1. one block per tile of kTileRows rows (grid ceil(rows / kTileRows), kWarpsPerBlock warps):
//      each warp adds dinp for its rows; then each thread takes columns threadIdx.x, + kThreads, ...
//      and sums dweight over the tile's rows in row order into the workspace (one row per tile).
//   2. add_column_partials (column_partials.cu): each column's tile partials added in a fixed
//      order into dweight.
// Every sum has a fixed order that depends only on (rows, channels): bitwise repeatable.
#include "kernels/cuda/rmsnorm.hpp"

#include "kernels/cuda/column_partials.hpp"
#include "kernels/cuda/warp_reduce.cuh"

namespace strata::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpSize * kWarpsPerBlock;

// The gain: the weight as read (LLaMA), or offset + weight (Gemma's 1 + w).
template <bool kOffset>
__device__ __forceinline__ float gain(const float* weight, float offset, std::int64_t c) {
  if constexpr (kOffset)
    return offset + weight[c];
  else
    return weight[c];
}

template <bool kOffset>
__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp, const float* weight,
                                       std::int64_t rows, std::int64_t channels, float eps, float offset) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const float* x = inp + row * channels;
  float* y = out + row * channels;
  float squares = 0.0f;
  for (std::int64_t c = lane; c < channels; c += kWarpSize) squares += x[c] * x[c];
  const float r = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(channels) + eps);
  for (std::int64_t c = lane; c < channels; c += kWarpSize) y[c] = x[c] * r * gain<kOffset>(weight, offset, c);
  if (lane == 0) rstd[row] = r;
}

template <bool kOffset>
__global__ void rmsnorm_backward_tile_kernel(float* dinp, float* weight_partials, const float* dout, const float* inp,
                                             const float* weight, const float* rstd, std::int64_t rows,
                                             std::int64_t channels, float offset) {
  __shared__ float tile_rstd[kTileRows];
  const std::int64_t tile_begin = static_cast<std::int64_t>(blockIdx.x) * kTileRows;
  const int tile_rows = static_cast<int>(min(static_cast<std::int64_t>(kTileRows), rows - tile_begin));
  if (threadIdx.x < tile_rows) tile_rstd[threadIdx.x] = rstd[tile_begin + threadIdx.x];
  __syncthreads();

  // dinp: warp per row.
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  for (int i = warp; i < tile_rows; i += kWarpsPerBlock) {
    const std::int64_t row = tile_begin + i;
    const float* x = inp + row * channels;
    const float* dy = dout + row * channels;
    float* dx = dinp + row * channels;
    const float r = tile_rstd[i];
    float dot = 0.0f;
    for (std::int64_t c = lane; c < channels; c += kWarpSize) dot += gain<kOffset>(weight, offset, c) * dy[c] * x[c];
    const float correction = r * r * r * warp_sum(dot) / static_cast<float>(channels);
    for (std::int64_t c = lane; c < channels; c += kWarpSize)
      dx[c] += r * gain<kOffset>(weight, offset, c) * dy[c] - correction * x[c];
  }

  // This tile's column sums, rows in order.
  for (std::int64_t c = threadIdx.x; c < channels; c += kThreads) {
    float dweight_sum = 0.0f;
    for (int i = 0; i < tile_rows; ++i) {
      const std::int64_t offset = (tile_begin + i) * channels + c;
      dweight_sum += dout[offset] * inp[offset] * tile_rstd[i];
    }
    weight_partials[static_cast<std::int64_t>(blockIdx.x) * channels + c] = dweight_sum;
  }
}

}  // namespace

void rmsnorm_forward(cudaStream_t stream, float* out, float* rstd, const float* inp, const float* weight,
                     std::int64_t rows, std::int64_t channels, float eps, float weight_offset) {
  if (rows <= 0 || channels <= 0) return;
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (weight_offset == 0.0f)
    rmsnorm_forward_kernel<false><<<blocks, kThreads, 0, stream>>>(out, rstd, inp, weight, rows, channels, eps, 0.0f);
  else
    rmsnorm_forward_kernel<true>
        <<<blocks, kThreads, 0, stream>>>(out, rstd, inp, weight, rows, channels, eps, weight_offset);
}

std::size_t rmsnorm_backward_workspace_bytes(std::int64_t rows, std::int64_t channels) {
  if (rows <= 0 || channels <= 0) return 0;
  return static_cast<std::size_t>(row_tiles(rows)) * static_cast<std::size_t>(channels) * sizeof(float);
}

void rmsnorm_backward(cudaStream_t stream, float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t rows, std::int64_t channels,
                      float weight_offset, void* workspace) {
  if (rows <= 0 || channels <= 0) return;
  const std::int64_t tiles = row_tiles(rows);
  float* weight_partials = static_cast<float*>(workspace);
  const auto blocks = static_cast<unsigned>(tiles);
  if (weight_offset == 0.0f)
    rmsnorm_backward_tile_kernel<false>
        <<<blocks, kThreads, 0, stream>>>(dinp, weight_partials, dout, inp, weight, rstd, rows, channels, 0.0f);
  else
    rmsnorm_backward_tile_kernel<true><<<blocks, kThreads, 0, stream>>>(dinp, weight_partials, dout, inp, weight, rstd,
                                                                        rows, channels, weight_offset);
  add_column_partials(stream, dweight, weight_partials, tiles, channels);
}

}  // namespace strata::cuda
