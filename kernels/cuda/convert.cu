// Conversion kernels: kThreads threads per block, grid min(ceil(count / kThreads), kMaxBlocks),
// grid-stride loop, one element per step; integer bit manipulation only (the same as
// strata::f32_to_bf16 / bf16_to_f32), so results are bitwise the CPU backend's.
#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/grid_stride.cuh"

#include <algorithm>

namespace strata::cuda {

namespace {

__device__ std::uint16_t to_bf16(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // NaN, quiet
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding_bias) >> 16);
}

__device__ float to_f32(std::uint16_t value) {
  return __uint_as_float(static_cast<std::uint32_t>(value) << 16);
}

__global__ void widen_kernel(float* out, const std::uint16_t* in, std::int64_t count) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_f32(in[i]);
}

__global__ void narrow_kernel(std::uint16_t* out, const float* in, std::int64_t count) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf16(in[i]);
}

__global__ void narrow_and_round_kernel(std::uint16_t* out, float* in, std::int64_t count) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint16_t stored = to_bf16(in[i]);
    out[i] = stored;
    in[i] = to_f32(stored);
  }
}

}  // namespace

void widen(cudaStream_t stream, float* out, const std::uint16_t* in, std::int64_t count) {
  if (count <= 0) return;
  widen_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, in, count);
}

void narrow(cudaStream_t stream, std::uint16_t* out, const float* in, std::int64_t count) {
  if (count <= 0) return;
  narrow_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, in, count);
}

void narrow_and_round(cudaStream_t stream, std::uint16_t* out, float* in, std::int64_t count) {
  if (count <= 0) return;
  narrow_and_round_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, in, count);
}

}  // namespace strata::cuda
