// Embedding kernels.
//
// Forward: one block of kThreads per row (b, t), grid min(batch * seq_len, kMaxBlocks) walking rows
// with a stride of gridDim.x; threads take channels threadIdx.x, + kThreads, ...
//
// Backward, dwte (no atomics, the CPU backend's order to the bit):
//   1. positions_kernel writes n = 0 .. N-1 (N = batch * seq_len) into the workspace;
//   2. cub::DeviceRadixSort::SortPairs sorts (token, n) by token. Radix sort is stable, so each
//      token's positions stay in increasing n, the CPU backend's (b, t) order;
//   3. one block per sorted slot j (grid N, kThreads): a block whose slot starts a run of equal
//      tokens walks the run in order, each thread adding dout rows into its channels starting
//      from dwte's value, so dwte[token][c] += d0, += d1, ... exactly as the CPU does. Blocks
//      that do not start a run return at once.
// Backward, dwpe: one thread per (t, c), grid-stride, adding dout over b = 0 .. batch-1 in order; with
// positions given (packed documents), the positions are sorted as the tokens are and each
// position's rows added in n order, as the CPU walks them.
// Gemma's scale multiplies each token row in forward and each dout row added into dwte; the plain
// form (scale 1) multiplies nothing, so its bits are the unscaled kernels'.
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/grid_stride.cuh"

#include <algorithm>

#include <cub/cub.cuh>

namespace strata::cuda {

namespace {

constexpr std::size_t kAlignment = 256;

std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// The workspace: positions in, tokens sorted, positions sorted (N int32 each), then CUB's room.
std::size_t index_bytes(std::int64_t rows) {
  return aligned(static_cast<std::size_t>(rows) * sizeof(std::int32_t));
}

std::size_t sort_temp_bytes(std::int64_t rows) {
  std::size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                  static_cast<std::int32_t*>(nullptr), static_cast<const std::int32_t*>(nullptr),
                                  static_cast<std::int32_t*>(nullptr), static_cast<int>(rows));
  return bytes;
}

__device__ float widen(float value) {
  return value;
}

__device__ float widen(std::uint16_t value) {
  return __uint_as_float(static_cast<unsigned>(value) << 16);
}

template <bool kScaled>
__device__ __forceinline__ float scaled(float value, float scale) {
  if constexpr (kScaled)
    return scale * value;
  else
    return value;
}

template <bool kScaled, typename Stored>
__global__ void embedding_forward_kernel(float* out, const std::int32_t* tokens, const Stored* wte, const Stored* wpe,
                                         std::int64_t rows, std::int64_t seq_len, std::int64_t channels,
                                         const std::int32_t* positions, float scale) {
  for (std::int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const Stored* token_row = wte + static_cast<std::int64_t>(tokens[n]) * channels;
    float* y = out + n * channels;
    if (wpe == nullptr) {
      for (std::int64_t c = threadIdx.x; c < channels; c += kThreads)
        y[c] = scaled<kScaled>(widen(token_row[c]), scale);
      continue;
    }
    const std::int64_t position = positions != nullptr ? positions[n] : n % seq_len;
    const Stored* position_row = wpe + position * channels;
    for (std::int64_t c = threadIdx.x; c < channels; c += kThreads)
      y[c] = scaled<kScaled>(widen(token_row[c]), scale) + widen(position_row[c]);
  }
}

template <typename Stored>
void launch_forward(cudaStream_t stream, float* out, const std::int32_t* tokens, const Stored* wte, const Stored* wpe,
                    std::int64_t batch, std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions,
                    float scale) {
  const std::int64_t rows = batch * seq_len;
  if (rows <= 0 || channels <= 0) return;
  const auto blocks = static_cast<unsigned>(std::min(rows, kMaxBlocks));
  if (scale == 1.0f)
    embedding_forward_kernel<false>
        <<<blocks, kThreads, 0, stream>>>(out, tokens, wte, wpe, rows, seq_len, channels, positions, scale);
  else
    embedding_forward_kernel<true>
        <<<blocks, kThreads, 0, stream>>>(out, tokens, wte, wpe, rows, seq_len, channels, positions, scale);
}

__global__ void positions_kernel(std::int32_t* positions, std::int64_t rows) {
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; n < rows;
       n += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    positions[n] = static_cast<std::int32_t>(n);
}

// Rows of a table keyed by `sorted_keys` (tokens, or positions), each key's dout rows added in n order.
template <bool kScaled>
__global__ void keyed_rows_kernel(float* table, const float* dout, const std::int32_t* sorted_keys,
                                  const std::int32_t* sorted_rows, std::int64_t rows, std::int64_t channels,
                                  float scale) {
  const std::int64_t first = blockIdx.x;
  const std::int32_t key = sorted_keys[first];
  if (first > 0 && sorted_keys[first - 1] == key) return;  // not the start of a run
  std::int64_t end = first + 1;
  while (end < rows && sorted_keys[end] == key) ++end;
  float* table_row = table + static_cast<std::int64_t>(key) * channels;
  for (std::int64_t c = threadIdx.x; c < channels; c += kThreads) {
    float total = table_row[c];
#pragma unroll 4
    for (std::int64_t j = first; j < end; ++j)
      total += scaled<kScaled>(dout[static_cast<std::int64_t>(sorted_rows[j]) * channels + c], scale);
    table_row[c] = total;
  }
}

__global__ void position_rows_kernel(float* dwpe, const float* dout, std::int64_t batch, std::int64_t seq_len,
                                     std::int64_t channels) {
  const std::int64_t count = seq_len * channels;
  const std::int64_t batch_stride = seq_len * channels;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float total = dwpe[i];
    for (std::int64_t b = 0; b < batch; ++b) total += dout[b * batch_stride + i];
    dwpe[i] = total;
  }
}

}  // namespace

void embedding_forward(cudaStream_t stream, float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions,
                       float scale) {
  launch_forward(stream, out, tokens, wte, wpe, batch, seq_len, channels, positions, scale);
}

void embedding_forward_bf16(cudaStream_t stream, float* out, const std::int32_t* tokens, const std::uint16_t* wte,
                            const std::uint16_t* wpe, std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                            const std::int32_t* positions, float scale) {
  launch_forward(stream, out, tokens, wte, wpe, batch, seq_len, channels, positions, scale);
}

std::size_t embedding_backward_workspace_bytes(std::int64_t batch, std::int64_t seq_len) {
  const std::int64_t rows = batch * seq_len;
  if (rows <= 0) return 0;
  return 3 * index_bytes(rows) + sort_temp_bytes(rows);
}

void embedding_backward(cudaStream_t stream, float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                        const std::int32_t* given_positions, float scale, void* workspace,
                        std::size_t workspace_bytes) {
  const std::int64_t rows = batch * seq_len;
  if (rows <= 0 || channels <= 0) return;
  auto* bytes = static_cast<unsigned char*>(workspace);
  auto* positions = reinterpret_cast<std::int32_t*>(bytes);
  auto* sorted_tokens = reinterpret_cast<std::int32_t*>(bytes + index_bytes(rows));
  auto* sorted_positions = reinterpret_cast<std::int32_t*>(bytes + 2 * index_bytes(rows));
  void* sort_temp = bytes + 3 * index_bytes(rows);
  std::size_t sort_bytes = workspace_bytes - 3 * index_bytes(rows);

  const auto index_blocks = grid_stride_blocks(rows);
  positions_kernel<<<index_blocks, kThreads, 0, stream>>>(positions, rows);
  // Sorts (key, n) by key, stably, and adds each key's rows in n order into `table`.
  const auto add_rows_by_key = [&](float* table, const std::int32_t* keys, float row_scale) {
    std::size_t temp_bytes = sort_bytes;
    cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, keys, sorted_tokens, positions, sorted_positions,
                                    static_cast<int>(rows), 0, static_cast<int>(sizeof(std::int32_t) * 8), stream);
    const auto blocks = static_cast<unsigned>(rows);
    if (row_scale == 1.0f)
      keyed_rows_kernel<false>
          <<<blocks, kThreads, 0, stream>>>(table, dout, sorted_tokens, sorted_positions, rows, channels, row_scale);
    else
      keyed_rows_kernel<true>
          <<<blocks, kThreads, 0, stream>>>(table, dout, sorted_tokens, sorted_positions, rows, channels, row_scale);
  };
  add_rows_by_key(dwte, tokens, scale);
  if (dwpe != nullptr && given_positions != nullptr) {
    add_rows_by_key(dwpe, given_positions, 1.0f);
  } else if (dwpe != nullptr) {
    const std::int64_t count = seq_len * channels;
    const auto blocks = grid_stride_blocks(count);
    position_rows_kernel<<<blocks, kThreads, 0, stream>>>(dwpe, dout, batch, seq_len, channels);
  }
}

}  // namespace strata::cuda
