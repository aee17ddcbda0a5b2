#include "cuda/int8_weights_cuda.hpp"

#include <cuda_bf16.h>

// Launch shapes:
// - groups of consecutive values (a block of a stored row, or a whole stored row): one thread
//   block per group, 256 threads striding over it, a block-wide max of |x| and an any-non-finite
//   flag (a max and an or: any order gives the same bits);
// - in_out with one scale per output feature (a stored column): one thread per column walking the
//   rows, so neighbouring threads read neighbouring values;
// - dequantization: grid-stride, one value per step.

namespace strata::int8::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr float kQuantMax = 127.0f;
constexpr unsigned kFullMask = 0xffffffffu;

// The CPU's scale (group_scale in cpu/int8_weights_cpu.cpp).
__device__ __forceinline__ float group_scale(float absmax, bool nonfinite) {
  return nonfinite ? __int_as_float(0x7fc00000) : absmax / kQuantMax;
}

// The CPU's quantize_value: round to nearest even, clamp; a scale of 0 or NaN stores 0.
__device__ __forceinline__ std::int8_t quantize_value(float x, float scale) {
  if (!(scale > 0.0f)) return 0;
  const float rounded = fminf(fmaxf(rintf(x / scale), -kQuantMax), kQuantMax);
  return static_cast<std::int8_t>(rounded);
}

__global__ void __launch_bounds__(kThreads)
    quantize_groups_kernel(std::int8_t* values, float* scales, const float* master, std::int64_t length) {
  __shared__ float partial_max[kWarps];
  __shared__ int partial_nonfinite[kWarps];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * length;
  float absmax = 0.0f;
  int nonfinite = 0;
  for (std::int64_t i = threadIdx.x; i < length; i += kThreads) {
    const float x = master[first + i];
    absmax = fmaxf(absmax, fabsf(x));
    nonfinite |= isfinite(x) ? 0 : 1;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    absmax = fmaxf(absmax, __shfl_xor_sync(kFullMask, absmax, offset));
    nonfinite |= __shfl_xor_sync(kFullMask, nonfinite, offset);
  }
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) partial_max[warp] = absmax, partial_nonfinite[warp] = nonfinite;
  __syncthreads();
  absmax = partial_max[0];
  nonfinite = partial_nonfinite[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) absmax = fmaxf(absmax, partial_max[w]), nonfinite |= partial_nonfinite[w];
  const float scale = group_scale(absmax, nonfinite != 0);
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  for (std::int64_t i = threadIdx.x; i < length; i += kThreads)
    values[first + i] = quantize_value(master[first + i], scale);
}

__global__ void quantize_columns_kernel(std::int8_t* values, float* scales, const float* master, std::int64_t rows,
                                        std::int64_t columns) {
  const std::int64_t column = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= columns) return;
  float absmax = 0.0f;
  bool nonfinite = false;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float x = master[r * columns + column];
    absmax = fmaxf(absmax, fabsf(x));
    nonfinite = nonfinite || !isfinite(x);
  }
  const float scale = group_scale(absmax, nonfinite);
  scales[column] = scale;
  for (std::int64_t r = 0; r < rows; ++r)
    values[r * columns + column] = quantize_value(master[r * columns + column], scale);
}

// Every value times its scale: scales[column] where each stored column has one (in_out, one per
// output feature), scales[i / group_length] otherwise.
__global__ void dequantize_bf16_kernel(std::uint16_t* out, const std::int8_t* values, const float* scales,
                                       std::int64_t count, std::int64_t columns, std::int64_t group_length,
                                       bool per_column) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float scale = per_column ? scales[i % columns] : scales[i / group_length];
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(values[i]) * scale));
  }
}

unsigned blocks_for(std::int64_t count, std::int64_t per_block) {
  const std::int64_t blocks = (count + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

}  // namespace

void quantize(cudaStream_t stream, Int8Matrix out, const float* master, std::int64_t in_features,
              std::int64_t out_features, WeightLayout layout) {
  const bool in_out = layout == WeightLayout::in_out;
  const std::int64_t rows = in_out ? in_features : out_features, row_length = in_out ? out_features : in_features;
  if (rows == 0 || row_length == 0) return;
  if (out.group_size == 0 && in_out) {
    quantize_columns_kernel<<<blocks_for(row_length, kThreads), kThreads, 0, stream>>>(out.values, out.scales, master,
                                                                                       rows, row_length);
    return;
  }
  const std::int64_t length = out.group_size > 0 ? out.group_size : row_length;
  quantize_groups_kernel<<<static_cast<unsigned>(rows * row_length / length), kThreads, 0, stream>>>(
      out.values, out.scales, master, length);
}

void dequantize_bf16(cudaStream_t stream, std::uint16_t* out, ConstInt8Matrix in, std::int64_t in_features,
                     std::int64_t out_features, WeightLayout layout) {
  const bool in_out = layout == WeightLayout::in_out;
  const std::int64_t row_length = in_out ? out_features : in_features, count = in_features * out_features;
  if (count == 0) return;
  const bool per_column = in.group_size == 0 && in_out;
  const std::int64_t group_length = in.group_size > 0 ? in.group_size : row_length;
  dequantize_bf16_kernel<<<blocks_for(count, kThreads), kThreads, 0, stream>>>(out, in.values, in.scales, count,
                                                                               row_length, group_length, per_column);
}

}  // namespace strata::int8::cuda
