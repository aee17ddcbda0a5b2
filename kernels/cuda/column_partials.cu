// One block of kTileGroups x kColumnsPerBlock threads per kColumnsPerBlock columns: group g sums
// tiles g, g + kTileGroups, ... in order, then the group sums are added in group order.
#include "kernels/cuda/column_partials.hpp"

namespace strata::cuda {

namespace {

constexpr int kColumnsPerBlock = 32;
constexpr int kTileGroups = 16;

__global__ void add_column_partials_kernel(float* out, const float* partials, std::int64_t tiles,
                                           std::int64_t channels) {
  __shared__ float group_sums[kTileGroups][kColumnsPerBlock];
  const int lane = static_cast<int>(threadIdx.x % kColumnsPerBlock);
  const int group = static_cast<int>(threadIdx.x / kColumnsPerBlock);
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumnsPerBlock + lane;
  float sum = 0.0f;
  if (c < channels) {
    for (std::int64_t tile = group; tile < tiles; tile += kTileGroups) sum += partials[tile * channels + c];
  }
  group_sums[group][lane] = sum;
  __syncthreads();
  if (group != 0 || c >= channels) return;
  float total = 0.0f;
  for (int g = 0; g < kTileGroups; ++g) total += group_sums[g][lane];
  out[c] += total;
}

}  // namespace

void add_column_partials(cudaStream_t stream, float* out, const float* partials, std::int64_t tiles,
                         std::int64_t channels) {
  if (tiles <= 0 || channels <= 0) return;
  const auto blocks = static_cast<unsigned>((channels + kColumnsPerBlock - 1) / kColumnsPerBlock);
  add_column_partials_kernel<<<blocks, kColumnsPerBlock * kTileGroups, 0, stream>>>(out, partials, tiles, channels);
}

}  // namespace strata::cuda
