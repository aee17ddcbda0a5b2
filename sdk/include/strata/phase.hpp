#pragma once
#include <cstdint>
#include <string_view>

namespace strata {

// The phase of a training step. Without a phase controller every step is `full`.
enum class Phase : std::uint8_t { warmup, full, predict, correct };

constexpr std::string_view phase_name(Phase phase) noexcept {
  switch (phase) {
    case Phase::warmup: return "warmup";
    case Phase::full: return "full";
    case Phase::predict: return "predict";
    case Phase::correct: return "correct";
  }
  return "full";
}

// Predict steps skip the backward pass; every other phase computes gradients.
constexpr bool phase_needs_gradients(Phase phase) noexcept {
  return phase != Phase::predict;
}

}  // namespace strata
