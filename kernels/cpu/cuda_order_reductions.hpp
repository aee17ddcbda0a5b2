#pragma once
// The CUDA backend's sums, computed on the host in the device's order (kernels/reduction_order.hpp),
// so that they give its bits: an update that runs on the host over offloaded rows (Backend::host_ops)
// clips by the norm the device would have computed.
#include <cstdint>

namespace strata::cpu {

// sum of values[i]^2, each square and every sum in double, as cuda::sum_of_squares.
double sum_of_squares_in_cuda_order(const float* values, std::int64_t count);
// sum of values[i] in double, as cuda::sum.
double sum_in_cuda_order(const float* values, std::int64_t count);

}  // namespace strata::cpu
