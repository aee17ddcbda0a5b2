#include "core/generate/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/util/random.hpp"

namespace strata {

std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, std::uint64_t step) {
  const auto vocab = static_cast<std::int64_t>(logits.size());
  if (options.temperature <= 0.0f)
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // The candidates: every id, cut to the top_k largest (nth_element, no full sort), ordered largest
  // first (ties: lower id first) only when the nucleus needs the order. Either way the order is
  // a function of the logits alone, so a seeded draw repeats.
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const auto larger = [&](std::int32_t a, std::int32_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)] ||
           (logits[static_cast<std::size_t>(a)] == logits[static_cast<std::size_t>(b)] && a < b);
  };
  if (options.top_k > 0 && options.top_k < vocab) {
    std::nth_element(order.begin(), order.begin() + options.top_k, order.end(), larger);
    order.resize(static_cast<std::size_t>(options.top_k));
  }
  if (options.top_p < 1.0f) std::sort(order.begin(), order.end(), larger);
  // Softmax of logit / temperature over the candidates, in double.
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weights(order.size());
  double total = 0.0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    weights[i] = std::exp((logits[static_cast<std::size_t>(order[i])] - top) / options.temperature);
    total += weights[i];
  }
  // The nucleus: the shortest prefix whose probability reaches top_p.
  std::size_t nucleus = order.size();
  if (options.top_p < 1.0f) {
    double reached = 0.0;
    for (std::size_t i = 0; i < order.size(); ++i) {
      reached += weights[i] / total;
      if (reached >= options.top_p) {
        nucleus = i + 1;
        break;
      }
    }
  }
  const double nucleus_total =
      std::accumulate(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(nucleus), 0.0);
  // A uniform in [0, 1) from 53 bits of the (seed, step) hash.
  const double uniform =
      static_cast<double>(splitmix64(splitmix64(options.seed) ^ step) >> 11) * (1.0 / 9007199254740992.0);
  double threshold = uniform * nucleus_total;
  for (std::size_t i = 0; i < nucleus; ++i) {
    threshold -= weights[i];
    if (threshold < 0.0) return order[i];
  }
  return order[nucleus - 1];  // rounding left a sliver: the last candidate
}

}  // namespace strata
