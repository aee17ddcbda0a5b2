#include "kernels/cpu/cuda_order_reductions.hpp"

#include <array>
#include <vector>

#include "kernels/reduction_order.hpp"

namespace strata::cpu {

namespace {

using kernels::kReductionPartials;
using kernels::kReductionThreads;
using kernels::kReductionWarp;

// What lane 0 holds after the warp's xor butterfly: at each offset every lane adds its partner's
// value to its own (own + partner, as __shfl_xor_sync's `value += ...`).
double tree_warp_sum(const double* lanes) {
  std::array<double, kReductionWarp> value;
  std::copy(lanes, lanes + kReductionWarp, value.begin());
  for (int offset = kReductionWarp / 2; offset > 0; offset /= 2) {
    std::array<double, kReductionWarp> next;
    for (int lane = 0; lane < kReductionWarp; ++lane) next[lane] = value[lane] + value[lane ^ offset];
    value = next;
  }
  return value[0];
}

// The block's fixed tree over its `threads` values (a multiple of the warp): each warp's sum, then
// warp 0 over them, its lanes past the warp count holding 0.
double tree_block_sum(const double* threads, int count) {
  std::array<double, kReductionWarp> warp_sums{};
  const int warps = count / kReductionWarp;
  for (int warp = 0; warp < warps; ++warp) warp_sums[warp] = tree_warp_sum(threads + warp * kReductionWarp);
  return tree_warp_sum(warp_sums.data());
}

template <typename Term>
double fixed_tree_sum(const float* values, std::int64_t count, Term term) {
  const int blocks = kernels::reduction_blocks(count);
  std::vector<double> partials(kReductionPartials, 0.0);
  if (blocks > 0) {
    const std::int64_t span = (count + blocks - 1) / blocks;
#pragma omp parallel for schedule(static)
    for (int block = 0; block < blocks; ++block) {
      const std::int64_t begin = std::min(static_cast<std::int64_t>(block) * span, count);
      const std::int64_t end = std::min(begin + span, count);
      // Thread t's running sum: its elements begin + t, begin + t + threads, ... in order.
      std::array<double, kReductionThreads> threads{};
      for (std::int64_t base = begin; base < end; base += kReductionThreads) {
        const int lanes = static_cast<int>(std::min<std::int64_t>(kReductionThreads, end - base));
        for (int t = 0; t < lanes; ++t) threads[t] += term(values[base + t]);
      }
      partials[static_cast<std::size_t>(block)] = tree_block_sum(threads.data(), kReductionThreads);
    }
  }
  return tree_block_sum(partials.data(), kReductionPartials);
}

}  // namespace

double sum_of_squares_in_cuda_order(const float* values, std::int64_t count) {
  return fixed_tree_sum(values, count, [](float value) { return static_cast<double>(value) * value; });
}

double sum_in_cuda_order(const float* values, std::int64_t count) {
  return fixed_tree_sum(values, count, [](float value) { return static_cast<double>(value); });
}

}  // namespace strata::cpu
