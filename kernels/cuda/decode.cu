#include "kernels/cuda/decode.hpp"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/warp_reduce.cuh"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace strata::cuda {

namespace {

constexpr int kMaxRopePairs = 512;  // the inverse frequencies travel in the kernel's parameters
constexpr int kMaxPerLane = 8;      // head_dim <= 32 * 8
constexpr int kWarpsPerBlock = 4;

struct InverseFrequencies {
  float values[kMaxRopePairs];
};

// Row r turns by position first_position + r % seq_len (rope_at: seq_len = rows), inverse = true
// by the opposite angle.
__global__ void rope_at_kernel(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                               std::int64_t first_position, int n_heads, int head_dim, bool inverse,
                               const InverseFrequencies frequencies) {
  const int half = head_dim / 2;
  const std::int64_t pairs_per_row = static_cast<std::int64_t>(n_heads) * half;
  const std::int64_t pairs = rows * pairs_per_row;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < pairs;
       index += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = index / pairs_per_row;
    const std::int64_t within_row = index - r * pairs_per_row;
    const int h = static_cast<int>(within_row / half);
    const int i = static_cast<int>(within_row - static_cast<std::int64_t>(h) * half);
    const float angle = static_cast<float>(first_position + r % seq_len) * frequencies.values[i];
    const float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
    float* v = x + r * stride + static_cast<std::int64_t>(h) * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

__global__ void attention_decode_kernel(const DecodeShape shape, float* out, const float* q, std::int64_t q_stride,
                                        const float* k_cache, const float* v_cache) {
  const std::int64_t task = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const std::int64_t NH = shape.n_head, D = shape.head_dim;
  if (task >= shape.rows * NH) return;  // whole warps leave together
  const std::int64_t r = task / NH, h = task % NH;
  const std::int64_t KV = static_cast<std::int64_t>(shape.n_kv_head) * D;
  const std::int64_t kv_head = (h / (NH / shape.n_kv_head)) * D;
  const float scale = rsqrtf(static_cast<float>(D));
  float query[kMaxPerLane], accumulated[kMaxPerLane];
  for (int j = 0; j < kMaxPerLane; ++j) {
    const std::int64_t i = lane + static_cast<std::int64_t>(j) * kWarpSize;
    query[j] = i < D ? q[r * q_stride + h * D + i] : 0.0f;
    accumulated[j] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  for (std::int64_t p = 0; p <= shape.first_position + r; ++p) {
    const float* k = k_cache + p * KV + kv_head;
    float partial = 0.0f;
    for (int j = 0; j < kMaxPerLane; ++j) {
      const std::int64_t i = lane + static_cast<std::int64_t>(j) * kWarpSize;
      if (i < D) partial += query[j] * k[i];
    }
    const float score = warp_sum(partial) * scale;
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max);
    const float weight = expf(score - new_max);
    running_sum = running_sum * correction + weight;
    const float* v = v_cache + p * KV + kv_head;
    for (int j = 0; j < kMaxPerLane; ++j) {
      const std::int64_t i = lane + static_cast<std::int64_t>(j) * kWarpSize;
      if (i < D) accumulated[j] = accumulated[j] * correction + weight * v[i];
    }
    running_max = new_max;
  }
  for (int j = 0; j < kMaxPerLane; ++j) {
    const std::int64_t i = lane + static_cast<std::int64_t>(j) * kWarpSize;
    if (i < D) out[r * NH * D + h * D + i] = accumulated[j] / running_sum;
  }
}

}  // namespace

void rope_at(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position,
             int n_heads, int head_dim, float theta) {
  const int half = head_dim / 2;
  const std::int64_t pairs = rows * n_heads * half;
  if (pairs <= 0) return;
  if (half > kMaxRopePairs) throw std::runtime_error("rope_at: head_dim " + std::to_string(head_dim) + " above 1024");
  InverseFrequencies frequencies{};
  for (int i = 0; i < half; ++i)
    frequencies.values[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  rope_at_kernel<<<grid_stride_blocks(pairs), kThreads, 0, stream>>>(x, rows, stride, rows, first_position, n_heads,
                                                                     head_dim, false, frequencies);
}

void rope_frequencies(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse) {
  const int half = head_dim / 2;
  const std::int64_t pairs = rows * n_heads * half;
  if (pairs <= 0 || seq_len <= 0) return;
  if (half > kMaxRopePairs)
    throw std::runtime_error("rope_frequencies: head_dim " + std::to_string(head_dim) + " above 1024");
  InverseFrequencies frequencies{};
  std::copy(inverse_frequencies, inverse_frequencies + half, frequencies.values);
  rope_at_kernel<<<grid_stride_blocks(pairs), kThreads, 0, stream>>>(x, rows, stride, seq_len, first_position, n_heads,
                                                                     head_dim, inverse, frequencies);
}

void attention_decode(cudaStream_t stream, const DecodeShape& shape, float* out, const AttentionInputs& in,
                      float* k_cache, float* v_cache) {
  if (shape.head_dim > kWarpSize * kMaxPerLane)
    throw std::runtime_error("attention_decode: head_dim " + std::to_string(shape.head_dim) + " above 256");
  const std::int64_t KV = static_cast<std::int64_t>(shape.n_kv_head) * shape.head_dim;
  const auto row_bytes = static_cast<std::size_t>(KV) * sizeof(float);
  const auto source_pitch = static_cast<std::size_t>(in.kv_stride) * sizeof(float);
  cudaMemcpy2DAsync(k_cache + shape.first_position * KV, row_bytes, in.k, source_pitch, row_bytes,
                    static_cast<std::size_t>(shape.rows), cudaMemcpyDeviceToDevice, stream);
  cudaMemcpy2DAsync(v_cache + shape.first_position * KV, row_bytes, in.v, source_pitch, row_bytes,
                    static_cast<std::size_t>(shape.rows), cudaMemcpyDeviceToDevice, stream);
  const std::int64_t tasks = shape.rows * shape.n_head;
  if (tasks <= 0) return;
  const auto blocks = static_cast<unsigned>((tasks + kWarpsPerBlock - 1) / kWarpsPerBlock);
  attention_decode_kernel<<<blocks, kWarpsPerBlock * kWarpSize, 0, stream>>>(shape, out, in.q, in.q_stride, k_cache,
                                                                             v_cache);
}

}  // namespace strata::cuda
