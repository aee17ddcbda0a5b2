#pragma once
// The median of a series of measurements (step times, per-step communication, timed ops): the
// upper of the two middle values for an even count, so it is always a value that was measured.
#include <algorithm>
#include <vector>

namespace strata {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace strata
