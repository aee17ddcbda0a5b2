// LayerNorm kernels.
//
// Forward: one warp per row, kWarpsPerBlock rows per block, grid ceil(rows / kWarpsPerBlock). Each
// lane sums columns lane, lane + 32, ...; the warp combines the 32 lane sums with a fixed xor
// butterfly. Two passes (mean, then squared deviations), as the CPU reference does.
//
// Backward, two kernels:
//   1. one block per tile of kTileRows rows (grid ceil(rows / kTileRows), kWarpsPerBlock warps):
//      each warp adds dinp for its rows (warp per row, as forward); then each thread takes columns
//      threadIdx.x, + kThreads, ... and sums dbias and dweight over the tile's rows in row order
//      into the workspace, one partial row per tile.
//   2. add_column_partials (column_partials.cu), once for dweight and once for dbias: each
//      column's tile partials added in a fixed order.
// Every sum has a fixed order that depends only on (rows, channels): bitwise repeatable.
#include "kernels/cuda/layernorm.hpp"

#include "kernels/cuda/column_partials.hpp"
#include "kernels/cuda/warp_reduce.cuh"

namespace strata::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpSize * kWarpsPerBlock;

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                         const float* bias, std::int64_t rows, std::int64_t channels, float eps) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const float* x = inp + row * channels;
  float* y = out + row * channels;
  float sum = 0.0f;
  for (std::int64_t c = lane; c < channels; c += kWarpSize) sum += x[c];
  const float m = warp_sum(sum) / static_cast<float>(channels);
  float square_sum = 0.0f;
  for (std::int64_t c = lane; c < channels; c += kWarpSize) square_sum += (x[c] - m) * (x[c] - m);
  const float s = 1.0f / sqrtf(warp_sum(square_sum) / static_cast<float>(channels) + eps);
  for (std::int64_t c = lane; c < channels; c += kWarpSize) y[c] = (x[c] - m) * s * weight[c] + bias[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

__global__ void layernorm_backward_tile_kernel(float* dinp, float* weight_partials, float* bias_partials,
                                               const float* dout, const float* inp, const float* weight,
                                               const float* mean, const float* rstd, std::int64_t rows,
                                               std::int64_t channels) {
  __shared__ float tile_mean[kTileRows];
  __shared__ float tile_rstd[kTileRows];
  const std::int64_t tile_begin = static_cast<std::int64_t>(blockIdx.x) * kTileRows;
  const int tile_rows = static_cast<int>(min(static_cast<std::int64_t>(kTileRows), rows - tile_begin));
  if (threadIdx.x < tile_rows) {
    tile_mean[threadIdx.x] = mean[tile_begin + threadIdx.x];
    tile_rstd[threadIdx.x] = rstd[tile_begin + threadIdx.x];
  }
  __syncthreads();

  // dinp: warp per row.
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  for (int r = warp; r < tile_rows; r += kWarpsPerBlock) {
    const std::int64_t row = tile_begin + r;
    const float* x = inp + row * channels;
    const float* dy = dout + row * channels;
    const float m = tile_mean[r];
    const float s = tile_rstd[r];
    float dnorm_sum = 0.0f;
    float dnorm_norm_sum = 0.0f;
    for (std::int64_t c = lane; c < channels; c += kWarpSize) {
      const float dnorm = weight[c] * dy[c];
      dnorm_sum += dnorm;
      dnorm_norm_sum += dnorm * (x[c] - m) * s;
    }
    const float dnorm_mean = warp_sum(dnorm_sum) / static_cast<float>(channels);
    const float dnorm_norm_mean = warp_sum(dnorm_norm_sum) / static_cast<float>(channels);
    float* dx = dinp + row * channels;
    for (std::int64_t c = lane; c < channels; c += kWarpSize) {
      const float norm = (x[c] - m) * s;
      dx[c] += (weight[c] * dy[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }

  // This tile's column sums, rows in order.
  for (std::int64_t c = threadIdx.x; c < channels; c += kThreads) {
    float dbias_sum = 0.0f;
    float dweight_sum = 0.0f;
    for (int r = 0; r < tile_rows; ++r) {
      const std::int64_t offset = (tile_begin + r) * channels + c;
      const float dy = dout[offset];
      dbias_sum += dy;
      dweight_sum += (inp[offset] - tile_mean[r]) * tile_rstd[r] * dy;
    }
    bias_partials[static_cast<std::int64_t>(blockIdx.x) * channels + c] = dbias_sum;
    weight_partials[static_cast<std::int64_t>(blockIdx.x) * channels + c] = dweight_sum;
  }
}

}  // namespace

void layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t rows, std::int64_t channels, float eps) {
  if (rows <= 0 || channels <= 0) return;
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  layernorm_forward_kernel<<<blocks, kThreads, 0, stream>>>(out, mean, rstd, inp, weight, bias, rows, channels, eps);
}

std::size_t layernorm_backward_workspace_bytes(std::int64_t rows, std::int64_t channels) {
  if (rows <= 0 || channels <= 0) return 0;
  return 2 * static_cast<std::size_t>(row_tiles(rows)) * static_cast<std::size_t>(channels) * sizeof(float);
}

void layernorm_backward(cudaStream_t stream, float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                        std::int64_t channels, void* workspace) {
  if (rows <= 0 || channels <= 0) return;
  const std::int64_t tiles = row_tiles(rows);
  float* weight_partials = static_cast<float*>(workspace);
  float* bias_partials = weight_partials + tiles * channels;
  layernorm_backward_tile_kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(
      dinp, weight_partials, bias_partials, dout, inp, weight, mean, rstd, rows, channels);
  add_column_partials(stream, dweight, weight_partials, tiles, channels);
  add_column_partials(stream, dbias, bias_partials, tiles, channels);
}

}  // namespace strata::cuda
