#pragma once
// The next token from a position's logits. Temperature 0 is greedy (the largest logit; the lowest
// id among equals), so a greedy continuation is deterministic. Otherwise the logits are divided by
// the temperature, kept to the top_k largest (0: all) and then to the smallest set of the most
// likely whose probability reaches top_p (nucleus sampling; 1: all), and one is drawn with a
// uniform number that a counter hash makes from (seed, step): a seeded run repeats exactly, with
// no generator state to carry.
#include <cstdint>
#include <span>

namespace strata {

struct SamplingOptions {
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  std::uint64_t seed = 42;
};

std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, std::uint64_t step);

}  // namespace strata
