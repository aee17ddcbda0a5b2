#include "cpu/int8_weights_cpu.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "strata/cpu_clones.hpp"
#include "strata/plugin_support/dequantizing_matmul_cpu.hpp"

namespace strata::int8 {

namespace {

using plugin_support::stored_shape;
using plugin_support::StoredShape;

constexpr float kQuantMax = 127.0f;

// Values per parallel task: enough work to pay for handing it to a thread. Tasks are whole groups
// (or whole stored rows), so no value's result depends on which thread ran it.
constexpr std::int64_t kTaskValues = std::int64_t{1} << 14;

// Columns per task when in_out keeps one scale per output feature (a stored column).
constexpr std::int64_t kColumnBlock = 256;

// in_out with one scale per output feature: a stored row times the scales vector. Otherwise every
// scale covers `block_length` consecutive values of a stored row.
bool scales_per_column(WeightLayout layout, std::int64_t group_size) {
  return group_size == 0 && layout == WeightLayout::in_out;
}

std::int64_t block_length(StoredShape stored, std::int64_t group_size) {
  return group_size > 0 ? group_size : stored.row_length;
}

// The scale of a group from its absmax. `nonfinite_probe` is the sum of x * 0 over the group: NaN
// exactly when the group holds an infinity or a NaN, which must reach the dequantized values.
float group_scale(float absmax, float nonfinite_probe) {
  if (std::isnan(nonfinite_probe)) return std::numeric_limits<float>::quiet_NaN();
  return absmax / kQuantMax;
}

// What x / scale divides by: the scale, or 1 where it is 0 or NaN (those groups store q = 0).
// Choosing the divisor ahead of the loop keeps the division unconditional, so it vectorizes
// without the masked division that only AVX-512 has.
inline float divisor_of(float scale) {
  return scale > 0.0f ? scale : 1.0f;
}

// Round to nearest even (the default rounding mode), then clamp: a value a hair over 127 * scale
// after division still lands on 127. `usable` false (scale 0 or NaN) stores 0, chosen before the
// conversion so that an infinite or NaN ratio is never converted.
inline std::int8_t quantize_value(float x, float divisor, bool usable) {
  const float rounded = std::clamp(std::nearbyint(x / divisor), -kQuantMax, kQuantMax);
  return static_cast<std::int8_t>(usable ? rounded : 0.0f);
}

// `count` blocks of `length` consecutive values, one scale each.
STRATA_CPU_CLONES void quantize_blocks(std::int8_t* values, float* scales, const float* master, std::int64_t length,
                                       std::int64_t count) {
  for (std::int64_t b = 0; b < count; ++b) {
    const float* x = master + b * length;
    float absmax = 0.0f, probe = 0.0f;
#pragma omp simd reduction(max : absmax) reduction(+ : probe)
    for (std::int64_t i = 0; i < length; ++i) {
      absmax = std::max(absmax, std::abs(x[i]));
      probe += x[i] * 0.0f;
    }
    const float scale = group_scale(absmax, probe);
    scales[b] = scale;
    const float divisor = divisor_of(scale);
    const bool usable = scale > 0.0f;
    std::int8_t* q = values + b * length;
#pragma omp simd
    for (std::int64_t i = 0; i < length; ++i) q[i] = quantize_value(x[i], divisor, usable);
  }
}

// Columns [first, first + width) of an in_out (rows, row_length) matrix, one scale per column.
STRATA_CPU_CLONES void quantize_columns(std::int8_t* values, float* scales, const float* master, std::int64_t rows,
                                        std::int64_t row_length, std::int64_t first, std::int64_t width) {
  std::array<float, kColumnBlock> absmax{}, probe{};
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = master + r * row_length + first;
#pragma omp simd
    for (std::int64_t o = 0; o < width; ++o) {
      absmax[o] = std::max(absmax[o], std::abs(x[o]));
      probe[o] += x[o] * 0.0f;
    }
  }
  // usable as a float (1 or 0): a bool array would keep the loop below from vectorizing.
  std::array<float, kColumnBlock> divisor{}, usable{};
  for (std::int64_t o = 0; o < width; ++o) {
    const float scale = group_scale(absmax[o], probe[o]);
    scales[first + o] = scale;
    divisor[o] = divisor_of(scale);
    usable[o] = scale > 0.0f ? 1.0f : 0.0f;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = master + r * row_length + first;
    std::int8_t* q = values + r * row_length + first;
#pragma omp simd
    for (std::int64_t o = 0; o < width; ++o) q[o] = quantize_value(x[o], divisor[o], usable[o] != 0.0f);
  }
}

// `count` blocks of `length` values, each times its own scale: int8 -> f32 and one multiply.
STRATA_CPU_CLONES void dequantize_blocks(float* out, const std::int8_t* values, const float* scales,
                                         std::int64_t length, std::int64_t count) {
  for (std::int64_t b = 0; b < count; ++b) {
    const float scale = scales[b];
    const std::int8_t* q = values + b * length;
    float* x = out + b * length;
#pragma omp simd
    for (std::int64_t i = 0; i < length; ++i) x[i] = static_cast<float>(q[i]) * scale;
  }
}

// `count` stored rows, each times the scales vector (in_out, one scale per output feature).
STRATA_CPU_CLONES void dequantize_scaled_rows(float* out, const std::int8_t* values, const float* scales,
                                              std::int64_t row_length, std::int64_t count) {
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int8_t* q = values + r * row_length;
    float* x = out + r * row_length;
#pragma omp simd
    for (std::int64_t o = 0; o < row_length; ++o) x[o] = static_cast<float>(q[o]) * scales[o];
  }
}

// Stored rows [first_row, first_row + row_count) into out (row_count * row_length floats).
void dequantize_rows(float* out, ConstInt8Matrix in, StoredShape stored, WeightLayout layout, std::int64_t first_row,
                     std::int64_t row_count) {
  const std::int8_t* values = in.values + first_row * stored.row_length;
  if (scales_per_column(layout, in.group_size)) {
    const std::int64_t rows_per_task = std::max<std::int64_t>(1, kTaskValues / stored.row_length);
#pragma omp parallel for schedule(static) if (row_count > rows_per_task)
    for (std::int64_t r0 = 0; r0 < row_count; r0 += rows_per_task) {
      dequantize_scaled_rows(out + r0 * stored.row_length, values + r0 * stored.row_length, in.scales,
                             stored.row_length, std::min(rows_per_task, row_count - r0));
    }
    return;
  }
  const std::int64_t length = block_length(stored, in.group_size);
  const std::int64_t blocks = row_count * stored.row_length / length;
  const float* scales = in.scales + first_row * stored.row_length / length;
  const std::int64_t blocks_per_task = std::max<std::int64_t>(1, kTaskValues / length);
#pragma omp parallel for schedule(static) if (blocks > blocks_per_task)
  for (std::int64_t b0 = 0; b0 < blocks; b0 += blocks_per_task) {
    dequantize_blocks(out + b0 * length, values + b0 * length, scales + b0, length,
                      std::min(blocks_per_task, blocks - b0));
  }
}

}  // namespace

std::int64_t scale_count(std::int64_t in_features, std::int64_t out_features, WeightLayout /*layout*/,
                         std::int64_t group_size) {
  return group_size > 0 ? in_features * out_features / group_size : out_features;
}

void quantize(Int8Matrix out, const float* master, std::int64_t in_features, std::int64_t out_features,
              WeightLayout layout) {
  const StoredShape stored = stored_shape(in_features, out_features, layout);
  if (scales_per_column(layout, out.group_size)) {
#pragma omp parallel for schedule(static)
    for (std::int64_t first = 0; first < stored.row_length; first += kColumnBlock) {
      quantize_columns(out.values, out.scales, master, stored.rows, stored.row_length, first,
                       std::min(kColumnBlock, stored.row_length - first));
    }
    return;
  }
  const std::int64_t length = block_length(stored, out.group_size);
  const std::int64_t blocks = stored.rows * stored.row_length / length;
  const std::int64_t blocks_per_task = std::max<std::int64_t>(1, kTaskValues / length);
#pragma omp parallel for schedule(static)
  for (std::int64_t b0 = 0; b0 < blocks; b0 += blocks_per_task) {
    quantize_blocks(out.values + b0 * length, out.scales + b0, master + b0 * length, length,
                    std::min(blocks_per_task, blocks - b0));
  }
}

void dequantize(float* out, ConstInt8Matrix in, std::int64_t in_features, std::int64_t out_features,
                WeightLayout layout) {
  const StoredShape stored = stored_shape(in_features, out_features, layout);
  dequantize_rows(out, in, stored, layout, 0, stored.rows);
}

void matmul_forward(float* out, const float* inp, ConstInt8Matrix weight, const float* bias, const MatmulShape& shape,
                    float* scratch, std::int64_t scratch_elements) {
  const StoredShape stored = stored_shape(shape.in_features, shape.out_features, shape.layout);
  plugin_support::dequantizing_matmul_forward(out, inp, bias, shape, scratch, scratch_elements,
                                              [&](float* rows, std::int64_t first, std::int64_t count) {
                                                dequantize_rows(rows, weight, stored, shape.layout, first, count);
                                              });
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     ConstInt8Matrix weight, const MatmulShape& shape, float* scratch, std::int64_t scratch_elements,
                     GradientWrite dinp_write) {
  const StoredShape stored = stored_shape(shape.in_features, shape.out_features, shape.layout);
  plugin_support::dequantizing_matmul_backward(dinp, dweight, dbias, dout, inp, shape, scratch, scratch_elements,
                                               dinp_write, [&](float* rows, std::int64_t first, std::int64_t count) {
                                                 dequantize_rows(rows, weight, stored, shape.layout, first, count);
                                               });
}

}  // namespace strata::int8
