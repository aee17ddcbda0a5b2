#include "kernels/cuda/decode.hpp"
#include "kernels/cuda/warp_reduce.cuh"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace strata::cuda {

namespace {

constexpr int kMaxPerLane = 8;  // head_dim <= 32 * 8
constexpr int kWarpsPerBlock = 4;

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
  const std::int64_t last = shape.first_position + r;
  const std::int64_t first = shape.window > 0 ? max(static_cast<std::int64_t>(0), last - shape.window + 1) : 0;
  for (std::int64_t p = first; p <= last; ++p) {
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
