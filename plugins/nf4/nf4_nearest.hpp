#pragma once
// The index of the nearest of `count` sorted values to `ratio`, ties to the larger, NaN to 0: one
// definition for the CPU kernels and the CUDA kernels, so both make the same comparisons.
#include <cstdint>

#if defined(__CUDACC__)
#define STRATA_NF4_HOST_DEVICE __host__ __device__
#else
#define STRATA_NF4_HOST_DEVICE
#endif

namespace strata::nf4 {

STRATA_NF4_HOST_DEVICE inline std::uint8_t nearest_index(const float* values, int count, float ratio) {
  if (!(ratio > values[0])) return 0;
  if (ratio >= values[count - 1]) return static_cast<std::uint8_t>(count - 1);
  int low = 0, high = count - 1;  // values[low] < ratio < values[high]
  while (high - low > 1) {
    const int middle = (low + high) / 2;
    if (values[middle] <= ratio)
      low = middle;
    else
      high = middle;
  }
  return static_cast<std::uint8_t>(ratio - values[low] < values[high] - ratio ? low : high);
}

}  // namespace strata::nf4
