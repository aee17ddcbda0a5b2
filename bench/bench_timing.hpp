#pragma once
// Timing helpers the C++ kernel benchmarks share: wall-clock milliseconds and the median of rounds.
#include <algorithm>
#include <chrono>
#include <vector>

namespace strata::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace strata::bench
