#pragma once
// Weight gradients of the norms without atomics: a tile kernel writes one partial column sum per
// tile of kTileRows rows, then add_column_partials adds, for each column, the tiles' partials in a
// fixed order into the gradient. The order depends only on (rows, channels).
#include <cuda_runtime_api.h>

#include <cstdint>

namespace strata::cuda {

inline constexpr int kTileRows = 32;

inline std::int64_t row_tiles(std::int64_t rows) {
  return (rows + kTileRows - 1) / kTileRows;
}

// out[c] += sum over tiles of partials[tile * channels + c]; partials is (tiles, channels).
void add_column_partials(cudaStream_t stream, float* out, const float* partials, std::int64_t tiles,
                         std::int64_t channels);

}  // namespace strata::cuda
