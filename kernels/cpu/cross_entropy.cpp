#include "kernels/cpu/cross_entropy.hpp"

namespace strata::cpu {

void cross_entropy_forward(float* losses, float* logsumexp, const float* logits, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* row = logits + n * padded_vocab;
    float max_value = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max_value)
    for (std::int64_t v = 0; v < vocab; ++v) max_value = std::max(max_value, row[v]);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max_value);
    logsumexp[n] = max_value + std::log(sum);
    losses[n] = logsumexp[n] - row[targets[n]];
  }
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* logsumexp, const std::int32_t* targets,
                            float dloss, std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab) {
#pragma omp parallel for schedule(static)
  for (std::int64_t n = 0; n < rows; ++n) {
    const float* row = logits + n * padded_vocab;
    float* drow = dlogits + n * padded_vocab;
    const float lse = logsumexp[n];
#pragma omp simd
    for (std::int64_t v = 0; v < vocab; ++v) drow[v] = std::exp(row[v] - lse) * dloss;
    for (std::int64_t v = vocab; v < padded_vocab; ++v) drow[v] = 0.0f;
    drow[targets[n]] -= dloss;
  }
}

}  // namespace strata::cpu
