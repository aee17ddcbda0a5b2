#pragma once
// Reductions whose result goes to the host: the squared gradient norm, the all-finite check and the
// loss sum. Deterministic: the same result for any thread count.
#include <cmath>
#include <cstdint>

namespace strata::cpu {

double sum_of_squares(const float* values, std::int64_t count);  // in double
bool all_finite(const float* values, std::int64_t count);
double sum(const float* values, std::int64_t count);  // in order, in double

namespace reference {

inline double sum_of_squares(const float* values, std::int64_t count) {
  double total = 0.0;
  for (std::int64_t i = 0; i < count; ++i) total += static_cast<double>(values[i]) * values[i];
  return total;
}

inline bool all_finite(const float* values, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i])) return false;
  return true;
}

}  // namespace reference

}  // namespace strata::cpu
