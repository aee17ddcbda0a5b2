#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

// Element types of tensors: f32, bf16 and f16 (IEEE binary16) storage (the built-in kernels compute
// in f32; fp16's matmuls multiply f16 operands), i32 token ids, and the types of quantized storage:
// i8 weight values (each matrix with its scales beside it), u8 codes (an 8-bit optimizer's moments,
// indices into its quantization map; also raw bytes) and u4 codes (4-bit, two to a byte, the first
// element in the low nibble: NF4 weights). (A later minor may append types: handle unknown values.)
enum class DType : std::uint8_t { f32, bf16, i32, i8, u8, f16, u4 };

// The bytes `count` elements of `dtype` occupy: the only size rule, since a u4 element is half a
// byte (an odd count rounds up to whole bytes).
constexpr std::uint64_t storage_bytes(DType dtype, std::int64_t count) noexcept {
  const auto elements = static_cast<std::uint64_t>(count < 0 ? 0 : count);
  switch (dtype) {
    case DType::u4: return (elements + 1) / 2;
    case DType::bf16:
    case DType::f16: return elements * 2;
    case DType::i8:
    case DType::u8: return elements;
    case DType::f32:
    case DType::i32: break;
  }
  return elements * 4;
}

constexpr std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::f16: return "f16";
    case DType::u4: return "u4";
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
