#pragma once
// NF4 weight storage on the CPU (QLoRA's 4-bit NormalFloat): a matrix in its stored layout, read as
// one flat run of values, is cut into blocks of `block_size` consecutive values (the last may be
// short); each block keeps its absmax, and each value the index of the nearest of the 16 NF4 levels
// to value / absmax, two indices to a byte, the first value of a byte in its low nibble (DType::u4).
// Dequantized: level[code] * absmax.
//
// Double quantization (the default, as bitsandbytes' compress_statistics): the blocks' absmax are
// stored in 8 bits too. Their mean over the matrix (summed in double, 256 at a time, then the
// partial sums in order) is subtracted, and each group of 256 centred absmax keeps one f32 scale
// (their largest magnitude) and, per absmax, the index of the nearest value of the signed 8-bit
// dynamic map to centred / scale. The value's codes are chosen against the exact absmax; its
// dequantized absmax is map[index] * scale + mean.
//
// Side data (the quantizer's `scales` row), floats first so they are aligned:
//   double_quant: [mean: f32][one f32 scale per 256 blocks][one u8 index per block]
//   otherwise:    [one f32 absmax per block]
// A block holding an infinity or a NaN has a NaN absmax (so, with double quantization, the mean is
// NaN too): its dequantized values are NaN and the next all-finite check sees them.
//
// Bytes: 0.5 a value plus 1/64 (the index) plus 4/(64*256) (the scales) with blocks of 64: 4.127 bits a
// value, 0.129x f32. Everything is built without contraction into FMA, so the CUDA kernels
// (cuda/nf4_weights_cuda.hpp) give the same codes and the same dequantized values. Quantization and
// dequantization give the same bits for any thread count.
#include <array>
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::nf4 {

// The 16 NF4 levels, as published with QLoRA (Dettmers et al. 2023, appendix E) and bitsandbytes:
// quantiles of N(0, 1) scaled to [-1, 1], with an exact zero (8 positive levels, 7 negative).
inline constexpr std::array<float, 16> kLevels = {-1.0f,
                                                  -0.6961928009986877f,
                                                  -0.5250730514526367f,
                                                  -0.39491748809814453f,
                                                  -0.28444138169288635f,
                                                  -0.18477343022823334f,
                                                  -0.09105003625154495f,
                                                  0.0f,
                                                  0.07958029955625534f,
                                                  0.16093020141124725f,
                                                  0.24611230194568634f,
                                                  0.33791524171829224f,
                                                  0.44070982933044434f,
                                                  0.5626170039176941f,
                                                  0.7229568362236023f,
                                                  1.0f};

// Absmax values per second-level scale (bitsandbytes' blocksize for its statistics).
inline constexpr std::int64_t kAbsmaxGroup = 256;

// bitsandbytes' signed dynamic 8-bit map (create_dynamic_map(signed=True), 7 exponent bits): for
// each decade 10^-6 .. 10^0 the midpoints of 2^i + 1 points spread evenly over [0.1, 1], both signs,
// plus 0 and 1; 256 values, sorted. Computed in double from that description, then rounded to f32.
const std::array<float, 256>& dynamic_map();

// Indices of the nearest entry: the level for value / absmax, the map entry for centred / scale.
// Ties go to the larger value (the comparisons are "above the midpoint"); NaN gives index 0.
std::uint8_t nearest_level(float ratio);
std::uint8_t nearest_map_index(float ratio);

struct Nf4Format {
  std::int64_t block_size = 64;
  bool double_quant = true;
};

std::int64_t block_count(std::int64_t elements, Nf4Format format);
std::uint64_t side_bytes(std::int64_t elements, Nf4Format format);

struct Nf4Matrix {
  std::uint8_t* codes;  // (elements + 1) / 2 bytes
  void* side;
  Nf4Format format;
};

struct ConstNf4Matrix {
  const std::uint8_t* codes;
  const void* side;
  Nf4Format format;
};

// From an f32 matrix of `elements` values in the stored layout (the optimizer's master copy, or the
// weights a frozen base loads); threaded over blocks.
void quantize(Nf4Matrix out, const float* master, std::int64_t elements);
// Values [first, first + count) of the stored matrix back to f32.
void dequantize(float* out, ConstNf4Matrix in, std::int64_t elements, std::int64_t first, std::int64_t count);
// Each block's absmax as dequantization sees it (tests, and the CUDA kernels' reference).
void dequantized_absmax(float* out, ConstNf4Matrix in, std::int64_t elements);

// The two matmuls (strata/plugin_support/dequantizing_matmul_cpu.hpp, as int8's).
void matmul_forward(float* out, const float* inp, ConstNf4Matrix weight, const float* bias, const MatmulShape& shape,
                    float* scratch, std::int64_t scratch_elements);
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     ConstNf4Matrix weight, const MatmulShape& shape, float* scratch, std::int64_t scratch_elements,
                     GradientWrite dinp_write);

}  // namespace strata::nf4
