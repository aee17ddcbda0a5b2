#pragma once
// Softmax + cross-entropy over logits (N, Vp) of which the first V columns are real (the rest is
// padding, masked out). Forward writes per-row loss and log-sum-exp (N); backward turns logits
// into dlogits *in place allowed* (dlogits may alias logits): dlogits = (softmax - onehot) * dloss.
// A negative target marks a row with no target: its loss and its dlogits are 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::cpu {

// The fast kernels take the logits one vocabulary chunk at a time, so the LM head never needs all
// of them at once: `logits` holds columns [first, first + width) of every row, rows `width` apart.
// Forward keeps a running max, a running sum of exponentials (rescaled when the max grows) and the
// target's logit per row; chunks come in order of `first`, and the chunk with first == 0 starts
// them. cross_entropy_finish then writes the loss and log-sum-exp; running_max may alias
// logsumexp and running_sum may alias losses. One chunk of width padded_vocab is the plain loss.
void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits, const float* logits,
                                 const std::int32_t* targets, std::int64_t rows, std::int64_t first, std::int64_t width,
                                 std::int64_t vocab);
void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                          const float* target_logits, const std::int32_t* targets, std::int64_t rows);
void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                  const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                  std::int64_t width, std::int64_t vocab);

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
    losses[n] = targets[n] < 0 ? Real(0) : logsumexp[n] - row[targets[n]];
  }
}

template <typename Real>
void cross_entropy_backward(Real* dlogits, const Real* logits, const Real* logsumexp, const std::int32_t* targets,
                            Real dloss, std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab) {
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t v = 0; v < padded_vocab; ++v) {
      const std::int64_t i = n * padded_vocab + v;
      if (v >= vocab || targets[n] < 0) {
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
