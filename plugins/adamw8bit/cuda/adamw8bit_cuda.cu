#include "cuda/adamw8bit_cuda.hpp"
#include "strata/plugin_support/adamw_update_cuda.cuh"

// Launch shape: grid = the number of quantization blocks, 256 threads each; thread t owns elements
// t, t + 256, ... of its block (coalesced), at most 16, kept in registers between the update and
// the quantization.

namespace strata::adamw8bit::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kPerThread = static_cast<int>(kMaxBlockSize) / kThreads;
constexpr unsigned kFullMask = 0xffffffffu;
enum Map { kSigned = 0, kUnsigned = 1 };

struct Moments {
  std::uint8_t* codes;
  float* absmax;
};

// How many of thresholds[0..254] are below x (a branch-free lower bound over the sorted row):
// the CPU's code of x.
__device__ __forceinline__ std::uint8_t code_of(const float* thresholds, float x) {
  int position = 0;
#pragma unroll
  for (int step = 128; step > 0; step >>= 1)
    if (thresholds[position + step - 1] < x) position += step;
  return static_cast<std::uint8_t>(position);
}

// The block's maximum of `value` over all threads; every thread gets it.
__device__ __forceinline__ float block_max(float value, float* partials) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) partials[warp] = value;
  __syncthreads();
  float result = partials[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) result = fmaxf(result, partials[w]);
  return result;
}

__global__ void __launch_bounds__(kThreads)
    adamw8bit_kernel(float* param, const float* grad, Moments m, Moments v, std::int64_t count, int block_size,
                     const kernels::AdamWCoefficients c, const __grid_constant__ QuantizationTables tables) {
  __shared__ float values[2][256];
  __shared__ float thresholds[2][256];
  __shared__ float partials[2][kWarps];
  const int t = static_cast<int>(threadIdx.x);
  for (int map = 0; map < 2; ++map) {
    values[map][t] = tables.values[map][t];
    thresholds[map][t] = tables.thresholds[map][t];
  }
  const std::int64_t block = blockIdx.x;
  const std::int64_t start = block * block_size;
  const int length = static_cast<int>(count - start < block_size ? count - start : block_size);
  const float m_scale = m.absmax[block];
  const float v_scale = v.absmax[block];
  __syncthreads();

  float m_new[kPerThread], v_new[kPerThread];
  float m_max = 0.0f, v_max = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = k * kThreads + t;
    m_new[k] = v_new[k] = 0.0f;
    if (i >= length) continue;
    const std::int64_t at = start + i;
    // Dequantized as dynamic_quantization.cpp does; updated by the CPU kernel's own element.
    m_new[k] = m_scale == 0.0f ? 0.0f : values[kSigned][m.codes[at]] * m_scale;
    v_new[k] = v_scale == 0.0f ? 0.0f : values[kUnsigned][v.codes[at]] * v_scale;
    kernels::adamw_element(param[at], grad[at], m_new[k], v_new[k], c);
    m_max = fmaxf(m_max, fabsf(m_new[k]));
    v_max = fmaxf(v_max, v_new[k]);
  }
  m_max = block_max(m_max, partials[kSigned]);
  v_max = block_max(v_max, partials[kUnsigned]);

#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = k * kThreads + t;
    if (i >= length) continue;
    const std::int64_t at = start + i;
    m.codes[at] = m_max == 0.0f ? tables.zero_code[kSigned] : code_of(thresholds[kSigned], m_new[k] / m_max);
    v.codes[at] = v_max == 0.0f ? tables.zero_code[kUnsigned] : code_of(thresholds[kUnsigned], v_new[k] / v_max);
  }
  if (t == 0) {
    m.absmax[block] = m_max;
    v.absmax[block] = v_max;
  }
}

}  // namespace

void adamw8bit_update(cudaStream_t stream, float* param, const float* grad, std::uint8_t* m_codes, float* m_absmax,
                      std::uint8_t* v_codes, float* v_absmax, std::int64_t count, std::int64_t block_size,
                      const kernels::AdamWCoefficients& coefficients, const QuantizationTables& tables) {
  if (count <= 0 || block_size <= 0 || block_size > kMaxBlockSize) return;
  const std::int64_t blocks = (count + block_size - 1) / block_size;
  adamw8bit_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      param, grad, Moments{m_codes, m_absmax}, Moments{v_codes, v_absmax}, count, static_cast<int>(block_size),
      coefficients, tables);
}

void adamw_f32_update(cudaStream_t stream, float* param, const float* grad, float* m, float* v, std::int64_t count,
                      const AdamWHyper& hyper) {
  plugin_support::adamw_update_f32_cuda(stream, param, grad, m, v, count, hyper);
}

}  // namespace strata::adamw8bit::cuda
