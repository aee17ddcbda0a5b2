// Reduction kernels, in the order kernels/reduction_order.hpp describes (the host reproduces it for
// norms of offloaded gradients: kernels/cpu/cuda_order_reductions.cpp). count 0 runs only the
// second launch, with no partials, which writes the neutral value.
// all_finite is an AND of integers, so its order does not matter; it uses __syncthreads_and.
#include "kernels/cuda/reductions.hpp"

#include "kernels/cuda/warp_reduce.cuh"

#include <algorithm>

namespace strata::cuda {

namespace {

constexpr int kThreads = kernels::kReductionThreads;
static_assert(kernels::kReductionWarp == kWarpSize);

// Fixed-tree sum over the block; blockDim.x is a multiple of 32 and at most 1024. The total is
// valid in thread 0.
__device__ double block_sum(double value) {
  __shared__ double warp_sums[kWarpSize];
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int warp = static_cast<int>(threadIdx.x / kWarpSize);
  const int warps = static_cast<int>(blockDim.x / kWarpSize);
  value = warp_sum(value);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  double total = 0.0;
  if (warp == 0) {
    total = warp_sum(lane < warps ? warp_sums[lane] : 0.0);
  }
  return total;
}

struct Square {
  __device__ double operator()(float value) const { return static_cast<double>(value) * value; }
};

struct Identity {
  __device__ double operator()(float value) const { return value; }
};

__device__ void block_range(std::int64_t count, std::int64_t* begin, std::int64_t* end) {
  const std::int64_t span = (count + gridDim.x - 1) / gridDim.x;
  *begin = min(static_cast<std::int64_t>(blockIdx.x) * span, count);
  *end = min(*begin + span, count);
}

template <typename Term>
__global__ void partial_sum_kernel(const float* values, std::int64_t count, double* partials, Term term) {
  std::int64_t begin = 0, end = 0;
  block_range(count, &begin, &end);
  double sum = 0.0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kThreads) sum += term(values[i]);
  sum = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void final_sum_kernel(const double* partials, int partial_count, double* result) {
  const double value = static_cast<int>(threadIdx.x) < partial_count ? partials[threadIdx.x] : 0.0;
  const double total = block_sum(value);
  if (threadIdx.x == 0) *result = total;
}

__global__ void partial_finite_kernel(const float* values, std::int64_t count, int* partials) {
  std::int64_t begin = 0, end = 0;
  block_range(count, &begin, &end);
  int finite = 1;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kThreads) finite &= isfinite(values[i]) ? 1 : 0;
  finite = __syncthreads_and(finite);
  if (threadIdx.x == 0) partials[blockIdx.x] = finite;
}

__global__ void final_finite_kernel(const int* partials, int partial_count, int* result) {
  const int value = static_cast<int>(threadIdx.x) < partial_count ? partials[threadIdx.x] : 1;
  const int finite = __syncthreads_and(value);
  if (threadIdx.x == 0) *result = finite != 0 ? 1 : 0;
}

int partial_blocks(std::int64_t count) {
  return kernels::reduction_blocks(count);
}

template <typename Term>
void launch_sum(cudaStream_t stream, const float* values, std::int64_t count, double* result, double* partials,
                Term term) {
  const int blocks = partial_blocks(count);
  if (blocks > 0) partial_sum_kernel<<<blocks, kThreads, 0, stream>>>(values, count, partials, term);
  final_sum_kernel<<<1, kReductionPartials, 0, stream>>>(partials, blocks, result);
}

}  // namespace

void sum_of_squares(cudaStream_t stream, const float* values, std::int64_t count, double* result, double* partials) {
  launch_sum(stream, values, count, result, partials, Square{});
}

void sum(cudaStream_t stream, const float* values, std::int64_t count, double* result, double* partials) {
  launch_sum(stream, values, count, result, partials, Identity{});
}

void all_finite(cudaStream_t stream, const float* values, std::int64_t count, int* result, int* partials) {
  const int blocks = partial_blocks(count);
  if (blocks > 0) partial_finite_kernel<<<blocks, kThreads, 0, stream>>>(values, count, partials);
  final_finite_kernel<<<1, kReductionPartials, 0, stream>>>(partials, blocks, result);
}

}  // namespace strata::cuda
