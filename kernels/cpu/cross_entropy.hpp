#pragma once
// Softmax + cross-entropy over logits (N, Vp) of which the first V columns are real (the rest is
// padding, masked out). Forward writes per-row loss and log-sum-exp (N); backward turns logits
// into dlogits *in place allowed* (dlogits may alias logits): dlogits = (softmax - onehot) * dloss.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::cpu {

void cross_entropy_forward(float* losses, float* logsumexp, const float* logits, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab);
void cross_entropy_backward(float* dlogits, const float* logits, const float* logsumexp, const std::int32_t* targets,
                            float dloss, std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab);

namespace reference {

template <typename Real>
void cross_entropy_forward(Real* losses, Real* logsumexp, const Real* logits, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab) {
  for (std::int64_t n = 0; n < rows; ++n) {
    const Real* row = logits + n * padded_vocab;
    Real max_value = -std::numeric_limits<Real>::infinity();
    for (std::int64_t v = 0; v < vocab; ++v) max_value = std::max(max_value, row[v]);
    Real sum = 0;
    for (std::int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max_value);
    logsumexp[n] = max_value + std::log(sum);
    losses[n] = logsumexp[n] - row[targets[n]];
  }
}

template <typename Real>
void cross_entropy_backward(Real* dlogits, const Real* logits, const Real* logsumexp, const std::int32_t* targets,
                            Real dloss, std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab) {
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t v = 0; v < padded_vocab; ++v) {
      const std::int64_t i = n * padded_vocab + v;
      if (v >= vocab) {
        dlogits[i] = 0;
        continue;
      }
      const Real probability = std::exp(logits[i] - logsumexp[n]);
      dlogits[i] = (probability - (v == targets[n] ? Real(1) : Real(0))) * dloss;
    }
  }
}

}  // namespace reference
}  // namespace strata::cpu
