#pragma once
// Warp-wide reductions by butterfly shuffles: every lane ends with the same result, summed in a
// fixed tree, so the kernels that use them are bitwise repeatable. For .cu files only.
#include <cuda_runtime.h>

namespace strata::cuda {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarp = 0xffffffffu;

template <typename Value>
__device__ inline Value warp_sum(Value value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullWarp, value, offset);
  return value;
}

__device__ inline float warp_max(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(kFullWarp, value, offset));
  return value;
}

}  // namespace strata::cuda
