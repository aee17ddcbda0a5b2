#pragma once
// The order the CUDA backend's reductions sum in (kernels/cuda/reductions.cu), shared with the host
// code that reproduces it (kernels/cpu/cuda_order_reductions.cpp), so that a norm computed on the
// host from offloaded gradients has the device's bits.
//
// First pass: blocks = min(ceil(count / kReductionThreads), kReductionPartials); block b owns the
// contiguous range [b * span, (b + 1) * span), span = ceil(count / blocks); thread t adds elements
// begin + t, begin + t + kReductionThreads, ... in order; the block combines its threads with a
// fixed tree (an xor butterfly in each warp of kReductionWarp lanes, then warp 0 over the warp
// sums, the lanes past the warp count holding 0). Second pass: one block of kReductionPartials
// threads, thread t holding partials[t] (0 past `blocks`), combined by the same tree.
#include <algorithm>
#include <cstdint>

namespace strata::kernels {

inline constexpr int kReductionThreads = 256;
inline constexpr int kReductionPartials = 1024;
inline constexpr int kReductionWarp = 32;

// The first pass's block count: a function of count alone.
constexpr int reduction_blocks(std::int64_t count) noexcept {
  if (count <= 0) return 0;
  return static_cast<int>(
      std::min<std::int64_t>((count + kReductionThreads - 1) / kReductionThreads, kReductionPartials));
}

}  // namespace strata::kernels
