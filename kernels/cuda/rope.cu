// RoPE kernel: one thread per (row, head, pair i), kThreads per block, grid
// min(ceil(pairs / kThreads), kMaxBlocks) with a grid-stride loop; no reductions. Row r turns by
// position first_position + r % seq_len: rope (training, first_position 0), rope_at (decoding,
// seq_len = rows) and rope_frequencies (a scaled RoPE's given frequencies) are this one kernel.
//
// The inverse frequencies 1 / theta^(2i/head_dim) are computed on the host with the same f32
// std::pow as the CPU backend and passed in the kernel's parameters, so the angles
// position * frequency are the CPU's to the bit; only cosf/sinf differ (by an ulp or two).
// Head dims above 2 * kMaxTabulated (none in practice) compute theta's frequency with the device
// powf; given frequencies are limited to kMaxTabulated.
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/rope.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace strata::cuda {

namespace {

constexpr int kMaxTabulated = 512;  // 2 KiB of kernel parameters, within the 4 KiB limit

struct InverseFrequencies {
  float values[kMaxTabulated];
};

__global__ void rope_kernel(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                            std::int64_t first_position, int n_heads, int head_dim, float theta, bool inverse,
                            const InverseFrequencies frequencies, const std::int32_t* positions) {
  const int half = head_dim / 2;
  const std::int64_t pairs_per_row = static_cast<std::int64_t>(n_heads) * half;
  const std::int64_t pairs = rows * pairs_per_row;
  for (std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < pairs;
       index += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = index / pairs_per_row;
    const std::int64_t within_row = index - r * pairs_per_row;
    const int h = static_cast<int>(within_row / half);
    const int i = static_cast<int>(within_row - static_cast<std::int64_t>(h) * half);
    const float inverse_frequency = i < kMaxTabulated
                                        ? frequencies.values[i]
                                        : 1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    const std::int64_t position = positions != nullptr ? positions[r] : first_position + r % seq_len;
    const float angle = static_cast<float>(position) * inverse_frequency;
    const float c = cosf(angle);
    const float s = inverse ? -sinf(angle) : sinf(angle);
    float* v = x + r * stride + static_cast<std::int64_t>(h) * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

void launch(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
            std::int64_t first_position, int n_heads, int head_dim, float theta, bool inverse,
            const InverseFrequencies& frequencies, const std::int32_t* positions = nullptr) {
  const std::int64_t pairs = rows * n_heads * (head_dim / 2);
  if (pairs <= 0 || seq_len <= 0) return;
  rope_kernel<<<grid_stride_blocks(pairs), kThreads, 0, stream>>>(x, rows, stride, seq_len, first_position, n_heads,
                                                                  head_dim, theta, inverse, frequencies, positions);
}

InverseFrequencies theta_frequencies(float theta, int head_dim) {
  InverseFrequencies frequencies{};
  for (int i = 0; i < std::min(head_dim / 2, kMaxTabulated); ++i)
    frequencies.values[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  return frequencies;
}

}  // namespace

void rope(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim,
          float theta, bool inverse) {
  launch(stream, x, rows, stride, seq_len, 0, n_heads, head_dim, theta, inverse, theta_frequencies(theta, head_dim));
}

void rope_at(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position,
             int n_heads, int head_dim, float theta) {
  launch(stream, x, rows, stride, rows, first_position, n_heads, head_dim, theta, false,
         theta_frequencies(theta, head_dim));
}

void rope_frequencies(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse) {
  if (head_dim / 2 > kMaxTabulated)
    throw std::runtime_error("rope_frequencies: head_dim " + std::to_string(head_dim) + " above 1024");
  InverseFrequencies frequencies{};
  std::copy(inverse_frequencies, inverse_frequencies + head_dim / 2, frequencies.values);
  launch(stream, x, rows, stride, seq_len, first_position, n_heads, head_dim, 0.0f, inverse, frequencies);
}

void rope_positions(cudaStream_t stream, float* x, std::int64_t rows, std::int64_t stride,
                    const std::int32_t* positions, int n_heads, int head_dim, float theta,
                    const float* inverse_frequencies, bool inverse) {
  if (inverse_frequencies != nullptr && head_dim / 2 > kMaxTabulated)
    throw std::runtime_error("rope: given frequencies for head_dim " + std::to_string(head_dim) + " above 1024");
  InverseFrequencies frequencies = theta_frequencies(theta, head_dim);
  if (inverse_frequencies != nullptr)
    std::copy(inverse_frequencies, inverse_frequencies + head_dim / 2, frequencies.values);
  launch(stream, x, rows, stride, 1, 0, n_heads, head_dim, theta, inverse, frequencies, positions);
}

}  // namespace strata::cuda
