#pragma once
// Counter-based, platform-independent randomness: the same seed gives the same numbers with any
// compiler or standard library (std::normal_distribution does not promise that).
#include <cmath>
#include <cstdint>
#include <numbers>

#include "strata/counter_random.hpp"

namespace strata {

class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() noexcept { return splitmix64(state_++); }
  // Uniform in (0, 1).
  double uniform() noexcept { return uniform_from_bits(next()); }
  // Box-Muller.
  double normal() noexcept {
    const double u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  std::uint64_t below(std::uint64_t bound) noexcept { return next() % bound; }

 private:
  std::uint64_t state_;
};

}  // namespace strata
