#include "kernels/cpu/bf16.hpp"

#include "strata/dtype.hpp"

namespace strata::cpu {

void widen(float* values, const std::uint16_t* stored, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) values[i] = bf16_to_f32(stored[i]);
}

void narrow(std::uint16_t* stored, const float* values, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) stored[i] = f32_to_bf16(values[i]);
}

void narrow_and_round(std::uint16_t* stored, float* values, std::int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    stored[i] = f32_to_bf16(values[i]);
    values[i] = bf16_to_f32(stored[i]);
  }
}

}  // namespace strata::cpu
