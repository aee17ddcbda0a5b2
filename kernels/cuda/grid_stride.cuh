#pragma once
// The launch shape of the element-wise kernels: kThreads threads per block, grid
// min(ceil(count / kThreads), kMaxBlocks), each thread walking i, i + gridDim.x * blockDim.x, ...
// The shape depends only on count, and no kernel using it reduces across threads, so results do
// not depend on it. For .cu files only.
#include <cstdint>

namespace strata::cuda {

inline constexpr int kThreads = 256;
inline constexpr std::int64_t kMaxBlocks = 65536;

inline unsigned grid_stride_blocks(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// A thread's first element and the distance to its next.
__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ inline std::int64_t index_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace strata::cuda
