#pragma once
// Reductions on the device, each in two launches: kReductionPartials (or fewer, as a function of
// count only) blocks write one partial each into `partials` (kReductionPartials device entries),
// then one block combines them into the single device value `result`, which the caller copies
// back. The order of every sum is fixed by count alone: the same bits on every run. count 0 writes
// the neutral result (0.0, or 1 for all_finite).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/reduction_order.hpp"

namespace strata::cuda {

inline constexpr int kReductionPartials = kernels::kReductionPartials;

// result = sum of values[i]^2, each square and the sums in double.
void sum_of_squares(cudaStream_t stream, const float* values, std::int64_t count, double* result, double* partials);
// result = sum of values[i], in double.
void sum(cudaStream_t stream, const float* values, std::int64_t count, double* result, double* partials);
// result = 1 when every value is finite (no NaN, no infinity), else 0.
void all_finite(cudaStream_t stream, const float* values, std::int64_t count, int* result, int* partials);

}  // namespace strata::cuda
