#pragma once
// Int8 weight storage on the CPU: symmetric absmax quantization of an f32 matrix, and the two
// matmuls that read an int8 weight. Layouts as strata/ops.hpp: in_out is stored (in_features,
// out_features), out_in is stored (out_features, in_features); the int8 values keep the stored
// layout, row-major.
//
// scale = absmax / 127 and q = clamp(round_to_nearest_even(x / scale), -127, 127) over a group:
//   group_size == 0: one group per output feature (out_features scales): a stored row of out_in,
//                    a stored column of in_out;
//   group_size > 0:  blocks of group_size consecutive values of a stored row (group_size divides
//                    the stored row length), stored_rows * row_length / group_size scales in
//                    row-major block order.
// An all-zero group has scale 0 and q 0. A group holding an infinity or a NaN gets a NaN scale and
// q 0, so its dequantized values are NaN and the next all-finite check sees them.
//
// The matmuls (strata/plugin_support/dequantizing_matmul_cpu.hpp, shared with nf4) dequantize a few
// whole stored rows at a time into `scratch` and multiply them with sgemm, so no f32 copy of the
// matrix exists; their contract is the built-in bf16-weight ones'. Quantization and dequantization
// give the same bits for any thread count.
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::int8 {

struct Int8Matrix {
  std::int8_t* values;
  float* scales;
  std::int64_t group_size;
};

struct ConstInt8Matrix {
  const std::int8_t* values;
  const float* scales;
  std::int64_t group_size;
};

std::int64_t scale_count(std::int64_t in_features, std::int64_t out_features, WeightLayout layout,
                         std::int64_t group_size);

// From an f32 matrix in the same layout (the optimizer's master copy); threaded over groups.
void quantize(Int8Matrix out, const float* master, std::int64_t in_features, std::int64_t out_features,
              WeightLayout layout);
// The whole matrix back to f32 (tests, export).
void dequantize(float* out, ConstInt8Matrix in, std::int64_t in_features, std::int64_t out_features,
                WeightLayout layout);

void matmul_forward(float* out, const float* inp, ConstInt8Matrix weight, const float* bias, const MatmulShape& shape,
                    float* scratch, std::int64_t scratch_elements);
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     ConstInt8Matrix weight, const MatmulShape& shape, float* scratch, std::int64_t scratch_elements,
                     GradientWrite dinp_write);

}  // namespace strata::int8
