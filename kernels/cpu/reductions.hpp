#pragma once
// Reductions whose result goes to the host: the squared gradient norm, the all-finite check and the
// loss sum. Deterministic: the same result for any thread count.
#include <cstdint>

namespace strata::cpu {

double sum_of_squares(const float* values, std::int64_t count);  // in double
bool all_finite(const float* values, std::int64_t count);
double sum(const float* values, std::int64_t count);  // in order, in double

}  // namespace strata::cpu
