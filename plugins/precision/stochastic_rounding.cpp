#include "stochastic_rounding.hpp"

#include <bit>
#include <cmath>

#include "strata/counter_random.hpp"
#include "strata/dtype.hpp"

namespace strata::plugins {

std::uint16_t round_bf16_stochastic(float value, std::uint16_t random) noexcept {
  if (!std::isfinite(value)) return f32_to_bf16(value);  // NaN and infinities as nearest rounding keeps them
  // Adding 16 random bits below the kept 16 carries into them with probability equal to the
  // dropped fraction; an overflow into the exponent is the correct rounding up.
  const std::uint32_t exact = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t rounded = static_cast<std::uint16_t>((exact + random) >> 16);
  // A finite value never rounds up to infinity: above the largest bf16 it goes down to it.
  return (rounded & 0x7f80u) == 0x7f80u ? static_cast<std::uint16_t>(exact >> 16) : rounded;
}

void StochasticBf16Rounding::round(std::uint16_t* out, const float* values, std::int64_t count,
                                   const RoundingCall& call) noexcept {
  if (!call.training) {
    for (std::int64_t i = 0; i < count; ++i) out[i] = f32_to_bf16(values[i]);
    return;
  }
  const std::uint64_t stream = splitmix64(name_hash(call.tensor) ^ splitmix64(static_cast<std::uint64_t>(call.step)));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint64_t bits = splitmix64(stream + static_cast<std::uint64_t>(i));
    out[i] = round_bf16_stochastic(values[i], static_cast<std::uint16_t>(bits >> 48));
  }
}

}  // namespace strata::plugins
