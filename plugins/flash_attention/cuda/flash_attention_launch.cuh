#pragma once
// What the flash plugin's two CUDA kernel sets share (flash_attention_cuda.cu, f32;
// flash_attention_tensor_cores.cu, bf16): where an attention's data lives, the backward pass's
// upstream inputs, the 64-row tile grid, the launch with a raised shared-memory limit, and the
// score gradient.
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "strata/ops.hpp"

namespace strata::flash::cuda::launching {

inline constexpr int kTile = 64;  // query rows and key columns per tile, in both kernel sets

// Where one attention's data lives: q is (N, n_head, D), k and v (N, n_kv_head, D), rows
// `stride` floats apart; query head h reads key/value head h / group.
struct Problem {
  const float* q;
  const float* k;
  const float* v;
  std::int64_t q_stride, kv_stride;
  int seq_len, n_head, group;
  float scale;        // 1 / sqrt(head_dim)
  bool vector_loads;  // every row of q, k and v starts 16-byte aligned
  int window;         // a sliding window (Mistral's): row t sees keys t - window + 1 .. t; 0: every key <= t
};

// The softmax-derivative inputs of the backward kernels: dout (B, T, n_head, D) and per score row
// the log-sum-exp and delta (B, n_head, T).
struct Upstream {
  const float* dout;
  const float* lse;
  const float* delta;
};

inline Problem problem_of(const AttentionShape& shape, const AttentionInputs& in) {
  const auto aligned = [](const float* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; };
  return {in.q,
          in.k,
          in.v,
          in.q_stride,
          in.kv_stride,
          shape.seq_len,
          shape.n_head,
          shape.n_head / shape.n_kv_head,
          1.0f / std::sqrt(static_cast<float>(shape.head_dim)),
          in.q_stride % 4 == 0 && in.kv_stride % 4 == 0 && aligned(in.q) && aligned(in.k) && aligned(in.v),
          shape.window};
}

// Whether query row `row` sees key `key`: causal, and within the window when there is one. A row
// may see no key of a whole tile under a window, so the online softmax's running maximum can
// still be -inf after a tile; the kernels then keep their running sums (alpha = 1, p = 0).
__device__ __forceinline__ bool visible(int key, int row, int window) {
  return key <= row && (window == 0 || row - key < window);
}

// Tiles along the sequence: the grid's x extent.
inline unsigned tiles(const AttentionShape& shape) {
  return static_cast<unsigned>((shape.seq_len + kTile - 1) / kTile);
}

// The tile kernels use more than the default 48 KiB of dynamic shared memory; the attribute is set
// before every launch (cheap, and keeps no state here).
template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, int threads, int shared_bytes, cudaStream_t stream, Args... args) {
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes);
  kernel<<<grid, threads, shared_bytes, stream>>>(args...);
}

// dS = P * (dP - delta) * scale: a score's gradient from its recomputed probability.
__device__ __forceinline__ float score_gradient(float p, float dp, float delta, float scale) {
  return p * (dp - delta) * scale;
}

}  // namespace strata::flash::cuda::launching
