#pragma once
// fp16 precision on the CPU: IEEE binary16 conversions, and the two matmuls of mixed-precision
// training as fp16 tensor cores run them: both operands of a product are binary16 values, the
// products accumulate in f32. The weight is stored as binary16 (bit patterns in uint16_t, the
// stored layout of strata/ops.hpp, row-major, no scales); the activation operand arrives as f32
// and is rounded to binary16 before it is multiplied: `inp` in forward, `dout` (and `inp`, for the
// weight gradient) in backward. That rounding is where small gradients underflow to zero unless the
// loss is scaled, and where a too large loss scale overflows to infinity. A rounded operand is exact
// in f32, so an f32 matmul on rounded operands is the binary16 product up to summation order.
//
// Conversions are bit-exact IEEE 754: round to nearest, ties to even; a magnitude that rounds past
// 65504 becomes an infinity; binary16 subnormals are kept (f32 subnormals round to a signed zero);
// a NaN stays a NaN, quieted, with the top bits of its payload. The array forms use F16C when the
// CPU has it (chosen at run time) and give the scalar forms' bits either way.
//
// The matmuls have the contract of strata/ops.hpp: inp is (N, C), out is (N, OC), out = inp @ W +
// bias (in_out, W stored (C, OC)) or inp @ W^T + bias (out_in, W stored (OC, C)); bias may be null.
// Backward overwrites or adds into dinp as told, adds into dweight (f32, the stored layout: the
// gradient of the master copy) and dbias (column sums of the rounded dout); any of the three may be
// null, and the weight is read only for dinp (it may be null without dinp).
//
// `scratch` (scratch_elements floats) is the only working memory: the N rows go in blocks whose
// rounded operands take about half of it, and the weight is widened to f32 a few whole stored rows
// at a time into the rest. It must hold 2 * max(C, OC) floats (one operand row and one stored row,
// or in backward a row of dout plus a row of inp or a stored row); more scratch means fewer blocks.
// How the work is cut (row blocks, weight chunks, and the tiles each product is split into for
// threads, each run by OpenBLAS on one thread) depends only on the shape and scratch_elements, never
// on which outputs are asked for or on the thread count, so every result is independent of both.
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::fp16 {

// What the activation operand is rounded to before a product: binary16 (fp16 training), bf16 (a
// phase computed as on bf16 tensor cores), or nothing (f32). The weight is binary16 either way.
enum class Operands : std::uint8_t { f16, bf16, f32 };

std::uint16_t f32_to_f16(float value) noexcept;
float f16_to_f32(std::uint16_t value) noexcept;

// Threaded over fixed-size tasks when large. round_to_f16 writes widen(narrow(in)) and may run in
// place (out == in).
void narrow(std::uint16_t* out, const float* in, std::int64_t count);
void widen(float* out, const std::uint16_t* in, std::int64_t count);
void round_to_f16(float* out, const float* in, std::int64_t count);

void matmul_forward(float* out, const float* inp, const std::uint16_t* weight, const float* bias,
                    const MatmulShape& shape, float* scratch, std::int64_t scratch_elements,
                    Operands operands = Operands::f16);
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const std::uint16_t* weight, const MatmulShape& shape, float* scratch,
                     std::int64_t scratch_elements, GradientWrite dinp_write, Operands operands = Operands::f16);

}  // namespace strata::fp16
