#pragma once
// Counter-based, platform-independent randomness: the same seed gives the same numbers with any
// compiler or standard library (std::normal_distribution does not promise that).
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>

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
    const double value = normal_at(state_);
    state_ += 2;
    return value;
  }
  // out[i] = float(normal() * std_dev) for the next out.size() normals, drawn in parallel: each
  // depends only on its counters, so the values are those of the sequential loop, in any thread
  // count (a 7B model's initialisation drew one value at a time for minutes).
  void fill_normal(std::span<float> out, double std_dev) noexcept;
  std::uint64_t below(std::uint64_t bound) noexcept { return next() % bound; }

 private:
  // The normal drawn from counters `counter` and `counter + 1`.
  static double normal_at(std::uint64_t counter) noexcept {
    const double u1 = uniform_from_bits(splitmix64(counter));
    const double u2 = uniform_from_bits(splitmix64(counter + 1));
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

  std::uint64_t state_;
};

}  // namespace strata
