#include "cuda/nf4_weights_cuda.hpp"

#include <cuda_bf16.h>

#include "nf4_nearest.hpp"

// Launch shapes:
// - the values' codes: one warp per NF4 block, a warp-wide max of |x| and an any-non-finite flag (a
//   max and an or: any order gives the same bits), then each lane codes whole bytes;
// - the absmax mean: one thread per group of 256 sums it in double, then one thread sums the groups
//   in order (the CPU's order);
// - the absmax codes: one thread block of 256 per group, a block-wide max of |centred|;
// - dequantization: grid-stride, one value per step.

namespace strata::nf4::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kGroupThreads = static_cast<int>(kAbsmaxGroup);
constexpr unsigned kFullMask = 0xffffffffu;
constexpr std::uint8_t kZeroLevel = 7;

// The levels and the 8-bit map, passed by value as a kernel argument (1,088 bytes).
struct Tables {
  float levels[16];
  float map[256];
};

Tables tables() {
  Tables t{};
  for (int i = 0; i < 16; ++i) t.levels[i] = kLevels[static_cast<std::size_t>(i)];
  for (int i = 0; i < 256; ++i) t.map[i] = dynamic_map()[static_cast<std::size_t>(i)];
  return t;
}

__global__ void quantize_blocks_kernel(std::uint8_t* codes, float* absmax, const float* master, std::int64_t elements,
                                       std::int64_t block_size, Tables t) {
  const std::int64_t block = blockIdx.x;
  const std::int64_t begin = block * block_size;
  const std::int64_t end = begin + block_size < elements ? begin + block_size : elements;
  float largest = 0.0f;
  int nonfinite = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += kWarp) {
    largest = fmaxf(largest, fabsf(master[i]));
    nonfinite |= isfinite(master[i]) ? 0 : 1;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    largest = fmaxf(largest, __shfl_xor_sync(kFullMask, largest, offset));
    nonfinite |= __shfl_xor_sync(kFullMask, nonfinite, offset);
  }
  const float scale = nonfinite != 0 ? __int_as_float(0x7fc00000) : largest;
  if (threadIdx.x == 0) absmax[block] = scale;
  const bool usable = scale > 0.0f;
  const float divisor = usable ? scale : 1.0f;
  for (std::int64_t i = begin + 2 * threadIdx.x; i < end; i += 2 * kWarp) {
    const std::uint8_t low = usable ? nearest_index(t.levels, 16, master[i] / divisor) : kZeroLevel;
    const std::uint8_t high = i + 1 >= end ? 0
                              : usable     ? nearest_index(t.levels, 16, master[i + 1] / divisor)
                                           : kZeroLevel;
    codes[i >> 1] = static_cast<std::uint8_t>(low | (high << 4));
  }
}

__global__ void partial_sums_kernel(double* partial, const float* absmax, std::int64_t blocks, std::int64_t groups) {
  const std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= groups) return;
  double sum = 0.0;
  const std::int64_t end = (g + 1) * kAbsmaxGroup < blocks ? (g + 1) * kAbsmaxGroup : blocks;
  for (std::int64_t b = g * kAbsmaxGroup; b < end; ++b) sum += absmax[b];
  partial[g] = sum;
}

__global__ void mean_kernel(float* mean, const double* partial, std::int64_t blocks, std::int64_t groups) {
  double total = 0.0;
  for (std::int64_t g = 0; g < groups; ++g) total += partial[g];
  *mean = static_cast<float>(total / static_cast<double>(blocks));
}

__global__ void __launch_bounds__(kGroupThreads)
    absmax_codes_kernel(float* scales, std::uint8_t* indices, const float* mean_in, const float* absmax,
                        std::int64_t blocks, Tables t) {
  __shared__ float partial_max[kGroupThreads / kWarp];
  const float mean = *mean_in;
  const std::int64_t b = static_cast<std::int64_t>(blockIdx.x) * kGroupThreads + threadIdx.x;
  const float centred = b < blocks ? absmax[b] - mean : 0.0f;
  float scale = fabsf(centred);
  for (int offset = 16; offset > 0; offset /= 2) scale = fmaxf(scale, __shfl_xor_sync(kFullMask, scale, offset));
  if (threadIdx.x % kWarp == 0) partial_max[threadIdx.x / kWarp] = scale;
  __syncthreads();
  scale = partial_max[0];
#pragma unroll
  for (int w = 1; w < kGroupThreads / kWarp; ++w) scale = fmaxf(scale, partial_max[w]);
  if (isnan(mean)) scale = __int_as_float(0x7fc00000);
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  const float divisor = scale > 0.0f ? scale : 1.0f;
  if (b < blocks) indices[b] = isnan(mean) ? 0 : nearest_index(t.map, 256, centred / divisor);
}

__global__ void dequantize_bf16_kernel(std::uint16_t* out, const std::uint8_t* codes, const float* side,
                                       std::int64_t elements, std::int64_t block_size, std::int64_t groups,
                                       bool double_quant, Tables t) {
  const std::uint8_t* indices = reinterpret_cast<const std::uint8_t*>(side + 1 + groups);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < elements;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t block = i / block_size;
    float absmax;
    if (double_quant) {  // side holds the mean, the scales and a byte per block: no f32 per block
      const float scaled = t.map[indices[block]] * side[1 + block / kAbsmaxGroup];
      absmax = scaled + side[0];
    } else {
      absmax = side[block];
    }
    const int code = (codes[i >> 1] >> ((i & 1) << 2)) & 0xf;
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(t.levels[code] * absmax));
  }
}

unsigned blocks_for(std::int64_t count, std::int64_t per_block) {
  const std::int64_t blocks = (count + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

std::int64_t group_count(std::int64_t blocks) {
  return (blocks + kAbsmaxGroup - 1) / kAbsmaxGroup;
}

}  // namespace

std::int64_t quantize_scratch_floats(std::int64_t elements, Nf4Format format) {
  const std::int64_t blocks = block_count(elements, format);
  return 2 * group_count(blocks) + blocks;  // the partial sums (doubles) first, then the absmax
}

void quantize(cudaStream_t stream, Nf4Matrix out, const float* master, std::int64_t elements, float* scratch) {
  const std::int64_t blocks = block_count(elements, out.format);
  if (blocks == 0) return;
  const Tables t = tables();
  const std::int64_t groups = group_count(blocks);
  auto* side = static_cast<float*>(out.side);
  float* absmax = out.format.double_quant ? scratch + 2 * groups : side;
  quantize_blocks_kernel<<<static_cast<unsigned>(blocks), kWarp, 0, stream>>>(out.codes, absmax, master, elements,
                                                                              out.format.block_size, t);
  if (!out.format.double_quant) return;
  auto* partial = reinterpret_cast<double*>(scratch);
  partial_sums_kernel<<<blocks_for(groups, kGroupThreads), kGroupThreads, 0, stream>>>(partial, absmax, blocks, groups);
  mean_kernel<<<1, 1, 0, stream>>>(side, partial, blocks, groups);
  absmax_codes_kernel<<<static_cast<unsigned>(groups), kGroupThreads, 0, stream>>>(
      side + 1, reinterpret_cast<std::uint8_t*>(side + 1 + groups), side, absmax, blocks, t);
}

void dequantize_bf16(cudaStream_t stream, std::uint16_t* out, ConstNf4Matrix in, std::int64_t elements) {
  if (elements == 0) return;
  const std::int64_t groups = group_count(block_count(elements, in.format));
  dequantize_bf16_kernel<<<blocks_for(elements, 256), 256, 0, stream>>>(
      out, in.codes, static_cast<const float*>(in.side), elements, in.format.block_size, groups, in.format.double_quant,
      tables());
}

}  // namespace strata::nf4::cuda
