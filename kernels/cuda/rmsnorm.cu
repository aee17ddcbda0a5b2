// RMSNorm kernels.
//
// Forward: one warp per row, kWarpsPerBlock rows per block, grid ceil(rows / kWarpsPerBlock); the
// warp combines its 32 lane sums with a fixed xor butterfly.
//
// Backward, two kernels:
//   1. one block per tile of kTileRows rows (grid ceil(rows / kTileRows), kWarpsPerBlock warps):
//      each warp adds dinp for its rows; then each thread takes columns threadIdx.x, + kThreads, ...
//      and sums dweight over the tile's rows in row order into the workspace (one row per tile).
//   2. one block per kColumnsPerBlock columns (grid ceil(channels / 32), 32 x kTileGroups threads):
//      thread group g sums tiles g, g + kTileGroups, ... in order; group 0 adds the kTileGroups
//      group sums in order and adds the total into dweight.
// Every sum has a fixed order that depends only on (rows, channels): bitwise repeatable.
#include "kernels/cuda/rmsnorm.hpp"

namespace strata::cuda {

namespace {

constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpSize * kWarpsPerBlock;
constexpr int kTileRows = 32;
constexpr int kColumnsPerBlock = 32;
constexpr int kTileGroups = 16;

__device__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

std::int64_t tiles_of(std::int64_t rows) {
  return (rows + kTileRows - 1) / kTileRows;
}

__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp, const float* weight,
                                       std::int64_t rows, std::int64_t channels, float eps) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const float* x = inp + row * channels;
  float* y = out + row * channels;
  float squares = 0.0f;
  for (std::int64_t c = lane; c < channels; c += kWarpSize) squares += x[c] * x[c];
  const float r = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(channels) + eps);
  for (std::int64_t c = lane; c < channels; c += kWarpSize) y[c] = x[c] * r * weight[c];
  if (lane == 0) rstd[row] = r;
}

__global__ void rmsnorm_backward_tile_kernel(float* dinp, float* weight_partials, const float* dout, const float* inp,
                                             const float* weight, const float* rstd, std::int64_t rows,
                                             std::int64_t channels) {
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
    for (std::int64_t c = lane; c < channels; c += kWarpSize) dot += weight[c] * dy[c] * x[c];
    const float correction = r * r * r * warp_sum(dot) / static_cast<float>(channels);
    for (std::int64_t c = lane; c < channels; c += kWarpSize) dx[c] += r * weight[c] * dy[c] - correction * x[c];
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

__global__ void rmsnorm_column_sum_kernel(float* dweight, const float* weight_partials, std::int64_t tiles,
                                          std::int64_t channels) {
  __shared__ float group_weight[kTileGroups][kColumnsPerBlock];
  const int lane = static_cast<int>(threadIdx.x % kColumnsPerBlock);
  const int group = static_cast<int>(threadIdx.x / kColumnsPerBlock);
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumnsPerBlock + lane;
  float weight_sum = 0.0f;
  if (c < channels) {
    for (std::int64_t tile = group; tile < tiles; tile += kTileGroups)
      weight_sum += weight_partials[tile * channels + c];
  }
  group_weight[group][lane] = weight_sum;
  __syncthreads();
  if (group != 0 || c >= channels) return;
  float weight_total = 0.0f;
  for (int g = 0; g < kTileGroups; ++g) weight_total += group_weight[g][lane];
  dweight[c] += weight_total;
}

}  // namespace

void rmsnorm_forward(cudaStream_t stream, float* out, float* rstd, const float* inp, const float* weight,
                     std::int64_t rows, std::int64_t channels, float eps) {
  if (rows <= 0 || channels <= 0) return;
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  rmsnorm_forward_kernel<<<blocks, kThreads, 0, stream>>>(out, rstd, inp, weight, rows, channels, eps);
}

std::size_t rmsnorm_backward_workspace_bytes(std::int64_t rows, std::int64_t channels) {
  if (rows <= 0 || channels <= 0) return 0;
  return static_cast<std::size_t>(tiles_of(rows)) * static_cast<std::size_t>(channels) * sizeof(float);
}

void rmsnorm_backward(cudaStream_t stream, float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t rows, std::int64_t channels,
                      void* workspace) {
  if (rows <= 0 || channels <= 0) return;
  const std::int64_t tiles = tiles_of(rows);
  float* weight_partials = static_cast<float*>(workspace);
  rmsnorm_backward_tile_kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(dinp, weight_partials, dout, inp,
                                                                                      weight, rstd, rows, channels);
  const auto column_blocks = static_cast<unsigned>((channels + kColumnsPerBlock - 1) / kColumnsPerBlock);
  rmsnorm_column_sum_kernel<<<column_blocks, kColumnsPerBlock * kTileGroups, 0, stream>>>(dweight, weight_partials,
                                                                                          tiles, channels);
}

}  // namespace strata::cuda
