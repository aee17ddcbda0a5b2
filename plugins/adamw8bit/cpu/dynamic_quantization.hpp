#pragma once
// Dynamic (tree) quantization of 8-bit optimizer state, block-wise: 256-value maps in [-1, 1] and
// [0, 1] whose codes are the indices of the sorted map, and blocks of values stored as one byte
// each plus their block's absolute maximum.
//
// The maps follow the dynamic tree data type of 8-bit optimizers (Dettmers et al., 2022). Read a
// byte from its top bit down: a sign bit; then a run of E zero bits, which sets the magnitude's
// decade 10^-E; then an indicator bit 1; the F bits after it are a linear fraction. With F bits,
// the 2^F levels of a decade are 10^-E * (0.1 + 0.9 (j + 1) / 2^F), j = 0 .. 2^F - 1: equal
// steps that cover (0.1, 1] * 10^-E, so 10^-E itself (and 1) is a level and decades never overlap.
//   signed (first moment):    7 bits after the sign, E = 0..6 (F = 6 - E): 127 magnitudes, both
//                             signs, and 0 (no indicator bit). The one pattern left, a sign bit
//                             over no indicator bit, would be a second zero; it stands for
//                             -10^-7, the next decade's single level. Range [-1, 1].
//   unsigned (second moment): the sign bit is one more bit of the run or the fraction: E = 0..7
//                             (F = 7 - E), 255 magnitudes and 0. Range [0, 1].
// Both are sorted ascending and contain exactly 0 and 1 (and -1, signed). Code of 0.0: 128
// (signed), 0 (unsigned).
//
// Zeroed memory: all-zero codes and absmax decode as zeros for either map. A block whose absmax
// is 0 is all zero whatever its codes say (signed code 0 is -1.0), and dequantization writes +0.0
// for it; quantizing an all-zero block stores the code of 0.0 and absmax 0.
#include <cstdint>
#include <span>

namespace strata::adamw8bit {

enum class MapKind : std::uint8_t { signed_dynamic, unsigned_dynamic };

// The 256 values, sorted ascending; built once per kind.
std::span<const float, 256> quantization_map(MapKind kind);

// The decision thresholds of a map: the code of x is how many of thresholds[0..254] lie below x
// (each the midpoint of two neighbouring values, moved on the float grid so that one strict
// comparison settles a tie as quantize_value does; [255] is +infinity). Fused kernels on other
// devices (cuda/adamw8bit_cuda.hpp) quantize with these, bit for bit as this file does.
std::span<const float, 256> decision_thresholds(MapKind kind);
std::uint8_t zero_code(MapKind kind);  // the code of 0.0

// The code (index) of the map value nearest `normalized`. Ties go to the value nearer zero.
// Values outside the map's range take its end codes; NaN gives some code (callers never pass one).
std::uint8_t quantize_value(std::span<const float, 256> map, float normalized);

std::int64_t block_count(std::int64_t count, std::int64_t block_size);  // ceil(count / block_size)

// Block-wise, over `count` values in blocks of `block_size` (the last block may be shorter):
// absmax[b] = max |value| of block b, codes[i] = code of value / absmax. absmax has
// block_count(count, block_size) floats. Threads over blocks; the same bytes for any thread count.
void quantize_blockwise(std::uint8_t* codes, float* absmax, const float* values, std::int64_t count,
                        std::int64_t block_size, MapKind kind);
void dequantize_blockwise(float* values, const std::uint8_t* codes, const float* absmax, std::int64_t count,
                          std::int64_t block_size, MapKind kind);

// One block, single-threaded: the pieces the block-wise functions and fused kernels (the 8-bit
// AdamW update) are built from. quantize_block maps value / absmax (given, >= every |value|) to
// codes, exactly as quantize_value; absmax 0 stores the code of 0.0.
float block_absmax(const float* values, std::int64_t count);
void quantize_block(std::uint8_t* codes, const float* values, std::int64_t count, float absmax, MapKind kind);
void dequantize_block(float* values, const std::uint8_t* codes, std::int64_t count, float absmax, MapKind kind);

}  // namespace strata::adamw8bit
