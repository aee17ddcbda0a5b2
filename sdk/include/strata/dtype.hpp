#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

// Element types of tensors: f32 and bf16 storage (compute is f32 on the CPU backend), and i32
// token ids.
enum class DType : std::uint8_t { f32, bf16, i32 };

constexpr std::size_t dtype_bytes(DType dtype) noexcept {
  return dtype == DType::bf16 ? 2 : 4;
}

constexpr std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  return "f32";
}

// bf16 is the top half of an f32; rounding is to nearest, ties to even, NaN kept quiet.
inline std::uint16_t f32_to_bf16(float value) noexcept {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding_bias) >> 16);
}

inline float bf16_to_f32(std::uint16_t value) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16);
}

}  // namespace strata
