#include "kernels/cpu/reductions.hpp"

#include <algorithm>
#include <cmath>

namespace strata::cpu {

double sum_of_squares(const float* values, std::int64_t count) {
  // Fixed-size chunks summed in order: the same result for any thread count.
  constexpr std::int64_t kChunk = 1 << 14;
  const std::int64_t chunks = (count + kChunk - 1) / kChunk;
  double total = 0.0;
  for (std::int64_t first_chunk = 0; first_chunk < chunks; first_chunk += 256) {
    const std::int64_t last_chunk = std::min(first_chunk + 256, chunks);
    double partial[256] = {};
#pragma omp parallel for schedule(static)
    for (std::int64_t chunk = first_chunk; chunk < last_chunk; ++chunk) {
      const std::int64_t begin = chunk * kChunk;
      const std::int64_t end = std::min(begin + kChunk, count);
      double sum = 0.0;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t i = begin; i < end; ++i) sum += static_cast<double>(values[i]) * values[i];
      partial[chunk - first_chunk] = sum;
    }
    for (std::int64_t chunk = first_chunk; chunk < last_chunk; ++chunk) total += partial[chunk - first_chunk];
  }
  return total;
}

// 0 * x is NaN exactly when x is NaN or infinite, so one sum answers it; any order gives the same
// yes or no.
bool all_finite(const float* values, std::int64_t count) {
  float sum = 0.0f;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
  for (std::int64_t i = 0; i < count; ++i) sum += values[i] * 0.0f;
  return std::isfinite(sum);
}

double sum(const float* values, std::int64_t count) {
  double total = 0.0;
  for (std::int64_t i = 0; i < count; ++i) total += values[i];
  return total;
}

}  // namespace strata::cpu
