#include "kernels/cpu/cross_entropy.hpp"

#include "strata/cpu_clones.hpp"

namespace strata::cpu {

namespace {

// The row bodies are bound by exp: each clone calls glibc's vector expf of its width (libmvec).
STRATA_CPU_CLONES float row_max(const float* row, std::int64_t valid) {
  float chunk_max = row[0];
#pragma omp simd reduction(max : chunk_max)
  for (std::int64_t v = 0; v < valid; ++v) chunk_max = std::max(chunk_max, row[v]);
  return chunk_max;
}

STRATA_CPU_CLONES float row_sum_exp(const float* row, std::int64_t valid, float max_value) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t v = 0; v < valid; ++v) sum += std::exp(row[v] - max_value);
  return sum;
}

STRATA_CPU_CLONES void row_softmax_gradient(float* drow, const float* row, std::int64_t valid, float lse, float dloss) {
#pragma omp simd
  for (std::int64_t v = 0; v < valid; ++v) drow[v] = std::exp(row[v] - lse) * dloss;
}

}  // namespace

void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits, const float* logits,
                                 const std::int32_t* targets, std::int64_t rows, std::int64_t first, std::int64_t width,
                                 std::int64_t vocab) {
  const std::int64_t valid = std::clamp<std::int64_t>(vocab - first, 0, width);  // the rest is padding
  if (valid == 0) return;
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* row = logits + n * width;
    const float chunk_max = row_max(row, valid);
    // The first chunk starts the running values; no -inf arithmetic (this file is -ffast-math).
    const float max_value = first == 0 ? chunk_max : std::max(running_max[n], chunk_max);
    const float sum = row_sum_exp(row, valid, max_value);
    running_sum[n] = first == 0 ? sum : running_sum[n] * std::exp(running_max[n] - max_value) + sum;
    running_max[n] = max_value;
    const std::int64_t target = targets[n];
    if (target >= first && target < first + valid) target_logits[n] = row[target - first];
  }
}

void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                          const float* target_logits, const std::int32_t* targets, std::int64_t rows) {
  for (std::int64_t n = 0; n < rows; ++n) {
    const float lse = running_max[n] + std::log(running_sum[n]);
    logsumexp[n] = lse;
    losses[n] = lse - target_logits[n];
  }
  // Rows without a target lose their loss apart, so the loop above stays the one GCC vectorizes
  // (its vector logf is libmvec's, whose bits the scalar logf does not give).
  for (std::int64_t n = 0; n < rows; ++n) {
    if (targets[n] < 0) losses[n] = 0.0f;
  }
}

void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                  const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                  std::int64_t width, std::int64_t vocab) {
  const std::int64_t valid = std::clamp<std::int64_t>(vocab - first, 0, width);
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* row = logits + n * width;
    float* drow = dlogits + n * width;
    const std::int64_t target = targets[n];
    if (target < 0) {  // no target: no gradient
      for (std::int64_t v = 0; v < width; ++v) drow[v] = 0.0f;
      continue;
    }
    const float lse = logsumexp[n];
    row_softmax_gradient(drow, row, valid, lse, dloss);
    for (std::int64_t v = valid; v < width; ++v) drow[v] = 0.0f;
    if (target >= first && target < first + valid) drow[target - first] -= dloss;
  }
}

}  // namespace strata::cpu
