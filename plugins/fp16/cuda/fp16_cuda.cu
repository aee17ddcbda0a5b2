#include "cuda/fp16_cuda.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Grid-stride, one value per step.

namespace strata::fp16::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

__device__ __forceinline__ std::int64_t first_index() {
  return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ std::int64_t stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

__global__ void narrow_kernel(std::uint16_t* out, const float* in, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += stride()) out[i] = __half_as_ushort(__float2half_rn(in[i]));
}

__global__ void widen_kernel(float* out, const std::uint16_t* in, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += stride()) out[i] = __half2float(__ushort_as_half(in[i]));
}

__global__ void round_kernel(float* out, const float* in, std::int64_t count, Operands operands) {
  for (std::int64_t i = first_index(); i < count; i += stride()) {
    const float x = in[i];
    out[i] = operands == Operands::f16    ? __half2float(__float2half_rn(x))
             : operands == Operands::bf16 ? __bfloat162float(__float2bfloat16_rn(x))
                                          : x;
  }
}

}  // namespace

void narrow(cudaStream_t stream, std::uint16_t* out, const float* in, std::int64_t count) {
  if (count > 0) narrow_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, in, count);
}

void widen(cudaStream_t stream, float* out, const std::uint16_t* in, std::int64_t count) {
  if (count > 0) widen_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, in, count);
}

void round_operand(cudaStream_t stream, float* out, const float* in, std::int64_t count, Operands operands) {
  if (count > 0) round_kernel<<<blocks_for(count), kThreads, 0, stream>>>(out, in, count, operands);
}

}  // namespace strata::fp16::cuda
