#include "cpu/nf4_weights_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nf4_nearest.hpp"
#include "strata/plugin_support/dequantizing_matmul_cpu.hpp"

namespace strata::nf4 {

namespace {

// Values per parallel task: enough work to pay for handing it to a thread. Tasks are whole blocks,
// so no value's result depends on which thread ran it.
constexpr std::int64_t kTaskValues = std::int64_t{1} << 14;
constexpr std::uint8_t kZeroLevel = 7;  // kLevels[7] == 0

// Where the side data's parts start (nf4_weights_cpu.hpp).
struct Side {
  const float* mean = nullptr;
  const float* scales = nullptr;
  const std::uint8_t* indices = nullptr;
  const float* absmax = nullptr;  // without double quantization
};

Side side_of(const void* side, std::int64_t blocks, Nf4Format format) {
  const auto* floats = static_cast<const float*>(side);
  if (!format.double_quant) return {nullptr, nullptr, nullptr, floats};
  const std::int64_t groups = (blocks + kAbsmaxGroup - 1) / kAbsmaxGroup;
  return {floats, floats + 1, reinterpret_cast<const std::uint8_t*>(floats + 1 + groups), nullptr};
}

float dequantized_absmax_of(const Side& side, std::int64_t block) {
  if (side.absmax != nullptr) return side.absmax[block];
  const float scaled = dynamic_map()[side.indices[block]] * side.scales[block / kAbsmaxGroup];
  return scaled + *side.mean;
}

std::uint8_t code_at(const std::uint8_t* codes, std::int64_t index) {
  return static_cast<std::uint8_t>((codes[index >> 1] >> ((index & 1) << 2)) & 0xf);
}

// Blocks [first, first + count): their absmax (NaN for a block holding an infinity or a NaN) and
// their values' codes.
void quantize_blocks(std::uint8_t* codes, float* absmax, const float* master, std::int64_t elements,
                     std::int64_t block_size, std::int64_t first, std::int64_t count) {
  for (std::int64_t b = first; b < first + count; ++b) {
    const std::int64_t begin = b * block_size, end = std::min(elements, begin + block_size);
    float largest = 0.0f, probe = 0.0f;
    for (std::int64_t i = begin; i < end; ++i) {
      largest = std::max(largest, std::abs(master[i]));
      probe += master[i] * 0.0f;  // NaN exactly when the block holds an infinity or a NaN
    }
    absmax[b] = std::isnan(probe) ? std::numeric_limits<float>::quiet_NaN() : largest;
    const bool usable = absmax[b] > 0.0f;
    const float divisor = usable ? absmax[b] : 1.0f;
    for (std::int64_t i = begin; i < end; i += 2) {  // blocks start at even values: whole bytes
      const std::uint8_t low = usable ? nearest_level(master[i] / divisor) : kZeroLevel;
      const std::uint8_t high = i + 1 >= end ? 0 : usable ? nearest_level(master[i + 1] / divisor) : kZeroLevel;
      codes[i >> 1] = static_cast<std::uint8_t>(low | (high << 4));
    }
  }
}

// The absmax stored in 8 bits: the mean taken out, one scale per group of 256 (nf4_weights_cpu.hpp).
void quantize_absmax(float* mean_out, float* scales, std::uint8_t* indices, const float* absmax, std::int64_t blocks) {
  const std::int64_t groups = (blocks + kAbsmaxGroup - 1) / kAbsmaxGroup;
  double total = 0.0;
  for (std::int64_t g = 0; g < groups; ++g) {
    double partial = 0.0;
    for (std::int64_t b = g * kAbsmaxGroup; b < std::min(blocks, (g + 1) * kAbsmaxGroup); ++b) partial += absmax[b];
    total += partial;
  }
  const float mean = static_cast<float>(total / static_cast<double>(blocks));
  *mean_out = mean;
#pragma omp parallel for schedule(static) if (groups > 16)
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t begin = g * kAbsmaxGroup, end = std::min(blocks, begin + kAbsmaxGroup);
    float scale = 0.0f;
    for (std::int64_t b = begin; b < end; ++b) scale = std::max(scale, std::abs(absmax[b] - mean));
    if (std::isnan(mean)) scale = std::numeric_limits<float>::quiet_NaN();
    scales[g] = scale;
    const float divisor = scale > 0.0f ? scale : 1.0f;
    for (std::int64_t b = begin; b < end; ++b)
      indices[b] = std::isnan(mean) ? 0 : nearest_map_index((absmax[b] - mean) / divisor);
  }
}

}  // namespace

const std::array<float, 256>& dynamic_map() {
  static const std::array<float, 256> map = [] {
    // Decades as literals, so the host and the device compilers read the same doubles.
    constexpr double kDecades[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
    std::vector<double> values;
    for (int i = 0; i < 7; ++i) {
      const int intervals = 1 << i;  // 2^i + 1 points over [0.1, 1]
      for (int j = 0; j < intervals; ++j) {
        const double low = 0.1 + 0.9 * j / intervals, high = 0.1 + 0.9 * (j + 1) / intervals;
        const double middle = (low + high) / 2.0;
        values.push_back(kDecades[i] * middle);
        values.push_back(-kDecades[i] * middle);
      }
    }
    values.push_back(0.0);
    values.push_back(1.0);
    std::sort(values.begin(), values.end());
    std::array<float, 256> out{};
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(values[i]);
    return out;
  }();
  return map;
}

std::uint8_t nearest_level(float ratio) {
  return nearest_index(kLevels.data(), static_cast<int>(kLevels.size()), ratio);
}

std::uint8_t nearest_map_index(float ratio) {
  return nearest_index(dynamic_map().data(), 256, ratio);
}

std::int64_t block_count(std::int64_t elements, Nf4Format format) {
  return (elements + format.block_size - 1) / format.block_size;
}

std::uint64_t side_bytes(std::int64_t elements, Nf4Format format) {
  const auto blocks = static_cast<std::uint64_t>(block_count(elements, format));
  if (!format.double_quant) return blocks * sizeof(float);
  const std::uint64_t groups = (blocks + kAbsmaxGroup - 1) / kAbsmaxGroup;
  return (1 + groups) * sizeof(float) + blocks;
}

void quantize(Nf4Matrix out, const float* master, std::int64_t elements) {
  const std::int64_t blocks = block_count(elements, out.format);
  if (blocks == 0) return;
  // Without double quantization the absmax are the side data; with it, they are centred and coded.
  std::vector<float> exact(out.format.double_quant ? static_cast<std::size_t>(blocks) : 0);
  float* absmax = out.format.double_quant ? exact.data() : static_cast<float*>(out.side);
  const std::int64_t blocks_per_task = std::max<std::int64_t>(1, kTaskValues / out.format.block_size);
#pragma omp parallel for schedule(static)
  for (std::int64_t b0 = 0; b0 < blocks; b0 += blocks_per_task)
    quantize_blocks(out.codes, absmax, master, elements, out.format.block_size, b0,
                    std::min(blocks_per_task, blocks - b0));
  if (!out.format.double_quant) return;
  auto* floats = static_cast<float*>(out.side);
  const std::int64_t groups = (blocks + kAbsmaxGroup - 1) / kAbsmaxGroup;
  quantize_absmax(floats, floats + 1, reinterpret_cast<std::uint8_t*>(floats + 1 + groups), absmax, blocks);
}

void dequantized_absmax(float* out, ConstNf4Matrix in, std::int64_t elements) {
  const std::int64_t blocks = block_count(elements, in.format);
  const Side side = side_of(in.side, blocks, in.format);
  for (std::int64_t b = 0; b < blocks; ++b) out[b] = dequantized_absmax_of(side, b);
}

void dequantize(float* out, ConstNf4Matrix in, std::int64_t elements, std::int64_t first, std::int64_t count) {
  if (count <= 0) return;
  const std::int64_t block_size = in.format.block_size;
  const Side side = side_of(in.side, block_count(elements, in.format), in.format);
  const std::int64_t first_block = first / block_size, last_block = (first + count - 1) / block_size;
  const std::int64_t blocks_per_task = std::max<std::int64_t>(1, kTaskValues / block_size);
#pragma omp parallel for schedule(static) if (last_block - first_block >= blocks_per_task)
  for (std::int64_t b0 = first_block; b0 <= last_block; b0 += blocks_per_task) {
    for (std::int64_t b = b0; b < std::min(last_block + 1, b0 + blocks_per_task); ++b) {
      const float absmax = dequantized_absmax_of(side, b);
      const std::int64_t begin = std::max(first, b * block_size);
      const std::int64_t end = std::min(first + count, (b + 1) * block_size);
      for (std::int64_t i = begin; i < end; ++i) out[i - first] = kLevels[code_at(in.codes, i)] * absmax;
    }
  }
}

void matmul_forward(float* out, const float* inp, ConstNf4Matrix weight, const float* bias, const MatmulShape& shape,
                    float* scratch, std::int64_t scratch_elements) {
  const std::int64_t elements = shape.in_features * shape.out_features;
  const std::int64_t row_length =
      plugin_support::stored_shape(shape.in_features, shape.out_features, shape.layout).row_length;
  plugin_support::dequantizing_matmul_forward(
      out, inp, bias, shape, scratch, scratch_elements, [&](float* rows, std::int64_t first, std::int64_t count) {
        dequantize(rows, weight, elements, first * row_length, count * row_length);
      });
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     ConstNf4Matrix weight, const MatmulShape& shape, float* scratch, std::int64_t scratch_elements,
                     GradientWrite dinp_write) {
  const std::int64_t elements = shape.in_features * shape.out_features;
  const std::int64_t row_length =
      plugin_support::stored_shape(shape.in_features, shape.out_features, shape.layout).row_length;
  plugin_support::dequantizing_matmul_backward(dinp, dweight, dbias, dout, inp, shape, scratch, scratch_elements,
                                               dinp_write, [&](float* rows, std::int64_t first, std::int64_t count) {
                                                 dequantize(rows, weight, elements, first * row_length,
                                                            count * row_length);
                                               });
}

}  // namespace strata::nf4
