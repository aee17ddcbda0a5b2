#pragma once
// Stochastic rounding of f32 values to bf16 (Gupta et al. 2015): a value between two bf16
// neighbours goes up with probability equal to its distance from the lower one, so the rounding is
// unbiased and small updates to bf16 weights survive on average instead of vanishing. The random
// bits come from a counter hash of (tensor, step, index), so a resumed run rounds exactly as the
// uninterrupted one. Evaluation-only weights round to nearest even. It runs where the backend's
// memory is host memory (the CPU backend); the policy refuses other devices.
#include <cstdint>
#include <string_view>

#include "strata/precision_policy.hpp"

namespace strata::plugins {

class StochasticBf16Rounding final : public Bf16Rounding {
 public:
  void round(std::uint16_t* out, const float* values, std::int64_t count, const RoundingCall& call) noexcept override;
};

// The rounding of one value with 16 random bits (exposed for tests of the formula).
std::uint16_t round_bf16_stochastic(float value, std::uint16_t random) noexcept;

}  // namespace strata::plugins
