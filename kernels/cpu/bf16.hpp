#pragma once
// Conversions between f32 compute buffers and bf16 storage (round to nearest even, as
// strata/dtype.hpp defines it).
#include <cstdint>

namespace strata::cpu {

// values[i] = bf16 -> f32 of stored[i]; exact.
void widen(float* values, const std::uint16_t* stored, std::int64_t count);
// stored[i] = bf16 rounding of values[i].
void narrow(std::uint16_t* stored, const float* values, std::int64_t count);
// Stores the bf16 rounding and replaces each value by it, so the forward pass goes on with exactly
// the numbers the backward pass will read back.
void narrow_and_round(std::uint16_t* stored, float* values, std::int64_t count);

}  // namespace strata::cpu
