// The nf4 weight plugin's CPU kernels: the 16 levels are QLoRA's published NF4 values and the
// normal quantiles they come from; the 8-bit map is bitsandbytes' dynamic map's shape; every value
// takes its nearest level and every absmax its nearest map entry (checked by brute force); a block
// holding an infinity or a NaN dequantizes to NaN; codes pack low nibble first, with a short last
// block; any range dequantizes as the whole; quantization is independent of the thread count; and
// the matmuls compute the reference products (in double) on the dequantized weight.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/cpu/matmul.hpp"
#include "plugins/nf4/cpu/nf4_weights_cpu.hpp"

namespace strata {
namespace {

using cpu::test::random_vector;

struct Quantized {
  std::vector<std::uint8_t> codes;
  std::vector<std::uint8_t> side;  // as the store's u8 row
  nf4::Nf4Format format;
  std::int64_t elements = 0;

  nf4::ConstNf4Matrix view() const { return {codes.data(), side.data(), format}; }
};

Quantized quantized(const std::vector<float>& master, nf4::Nf4Format format) {
  Quantized q;
  q.format = format;
  q.elements = static_cast<std::int64_t>(master.size());
  q.codes.assign((master.size() + 1) / 2, std::uint8_t{0xab});
  // Floats first in the side data: keep the buffer 4-byte aligned, and every byte written.
  q.side.assign(nf4::side_bytes(q.elements, format) + 3, std::uint8_t{0xcd});
  nf4::quantize({q.codes.data(), q.side.data(), format}, master.data(), q.elements);
  q.side.resize(nf4::side_bytes(q.elements, format));
  return q;
}

std::vector<float> dequantized(const Quantized& q) {
  std::vector<float> out(static_cast<std::size_t>(q.elements), std::numeric_limits<float>::quiet_NaN());
  nf4::dequantize(out.data(), q.view(), q.elements, 0, q.elements);
  return out;
}

std::vector<float> absmax_of(const Quantized& q) {
  std::vector<float> out(static_cast<std::size_t>(nf4::block_count(q.elements, q.format)));
  nf4::dequantized_absmax(out.data(), q.view(), q.elements);
  return out;
}

int code_at(const Quantized& q, std::int64_t i) {
  return (q.codes[static_cast<std::size_t>(i / 2)] >> (i % 2 == 0 ? 0 : 4)) & 0xf;
}

// The index of the entry nearest to x, by brute force; -1 when two are equally near.
template <class Values>
int brute_force_nearest(const Values& values, double x) {
  int best = 0;
  bool tie = false;
  for (int i = 1; i < static_cast<int>(values.size()); ++i) {
    const double distance = std::abs(values[static_cast<std::size_t>(i)] - x);
    const double best_distance = std::abs(values[static_cast<std::size_t>(best)] - x);
    if (distance < best_distance)
      best = i, tie = false;
    else if (distance == best_distance)
      tie = true;
  }
  return tie ? -1 : best;
}

// QLoRA's construction (bitsandbytes' create_normal_map with offset 0.9677083): 8 positive quantiles
// of N(0, 1) at probabilities spread from the offset to 1/2, 7 negative ones, and 0, scaled by the
// largest. The published levels are these within 2e-7 (largest gap seen: 1.08e-7, level 14):
// bitsandbytes spreads the probabilities in f32 before taking the quantiles.
TEST(Nf4Kernels, LevelsAreQLoRAsNormalQuantiles) {
  const boost::math::normal normal;
  constexpr double kOffset = 0.9677083;
  std::vector<double> levels;
  for (int i = 0; i < 8; ++i) levels.push_back(quantile(normal, kOffset + (0.5 - kOffset) * i / 8.0));
  for (int i = 0; i < 7; ++i) levels.push_back(-quantile(normal, kOffset + (0.5 - kOffset) * i / 7.0));
  levels.push_back(0.0);
  std::sort(levels.begin(), levels.end());
  const double largest = levels.back();
  for (std::size_t i = 0; i < levels.size(); ++i) {
    EXPECT_NEAR(nf4::kLevels[i], levels[i] / largest, 2e-7) << i;
    if (i > 0) {
      EXPECT_LT(nf4::kLevels[i - 1], nf4::kLevels[i]);
    }
  }
  EXPECT_EQ(nf4::kLevels[7], 0.0f);
  EXPECT_EQ(nf4::kLevels[0], -1.0f);
  EXPECT_EQ(nf4::kLevels[15], 1.0f);
  // Two values the QLoRA paper prints in full (its appendix), to the f32 they round to.
  EXPECT_EQ(nf4::kLevels[1], -0.6961928009986877f);
  EXPECT_EQ(nf4::kLevels[14], 0.7229568362236023f);
}

// Signed, 7 exponent bits: 2^i values of each sign in decade 10^(i-6), 0 and 1: 256, sorted.
TEST(Nf4Kernels, DynamicMapHasItsDecadesZeroAndOne) {
  const std::array<float, 256>& map = nf4::dynamic_map();
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(std::adjacent_find(map.begin(), map.end()), map.end()) << "no value twice";
  EXPECT_EQ(std::count(map.begin(), map.end(), 0.0f), 1);
  EXPECT_EQ(map.back(), 1.0f);
  EXPECT_EQ(map.front(), -map[254]) << "the negative half mirrors the positive one below 1";
  for (int i = 0; i < 7; ++i) {
    const double low = 0.1 * std::pow(10.0, i - 6), high = std::pow(10.0, i - 6);
    const auto in_decade = std::count_if(map.begin(), map.end(), [&](float v) { return v > low && v < high; });
    EXPECT_EQ(in_decade, 1 << i) << "decade " << i;
  }
  EXPECT_FLOAT_EQ(map[128], 0.55e-6f) << "the smallest positive: 10^-6 times the midpoint of [0.1, 1]";
  EXPECT_FLOAT_EQ(map[254], 0.99296875f) << "the largest below 1: the last of 64 midpoints";
}

TEST(Nf4Kernels, EveryValueTakesItsNearestLevelAndEveryAbsmaxItsNearestMapEntry) {
  std::vector<float> master = random_vector<float>(64 * 1000 + 10, 3, 0.05);
  for (std::size_t i = 17; i < master.size(); i += 901) master[i] *= 30.0f;  // outliers move the absmax
  std::fill(master.begin() + 640, master.begin() + 704, 0.0f);               // a zero block (block 10)
  for (const bool double_quant : {false, true}) {
    SCOPED_TRACE(double_quant ? "double quantized" : "f32 absmax");
    const Quantized q = quantized(master, {64, double_quant});
    const std::vector<float> absmax = absmax_of(q);
    const std::vector<float> values = dequantized(q);
    std::vector<float> exact(absmax.size(), 0.0f);
    for (std::size_t i = 0; i < master.size(); ++i) exact[i / 64] = std::max(exact[i / 64], std::abs(master[i]));
    std::size_t checked = 0;
    for (std::size_t i = 0; i < master.size(); ++i) {
      const float block_absmax = exact[i / 64];
      const int expected = block_absmax > 0.0f ? brute_force_nearest(nf4::kLevels, master[i] / block_absmax) : 7;
      if (expected < 0) continue;  // exactly between two levels
      ASSERT_EQ(code_at(q, static_cast<std::int64_t>(i)), expected) << i;
      ASSERT_EQ(values[i], nf4::kLevels[static_cast<std::size_t>(expected)] * absmax[i / 64]) << i;
      ++checked;
    }
    EXPECT_GT(checked, master.size() * 99 / 100);
    if (!double_quant) {
      EXPECT_EQ(absmax, exact);
      continue;
    }
    // The absmax side: mean, one scale per 256 blocks, a map index per block, each the nearest.
    const auto* floats = reinterpret_cast<const float*>(q.side.data());
    double total = 0.0;
    for (float a : exact) total += a;
    const float mean = floats[0];
    EXPECT_NEAR(mean, total / static_cast<double>(exact.size()), 1e-6 * mean);
    const std::int64_t groups = (static_cast<std::int64_t>(exact.size()) + 255) / 256;
    const auto* indices = q.side.data() + (1 + groups) * sizeof(float);
    for (std::size_t b = 0; b < exact.size(); ++b) {
      const float scale = floats[1 + b / 256];
      const int expected = brute_force_nearest(nf4::dynamic_map(), (exact[b] - mean) / scale);
      if (expected >= 0) {
        EXPECT_EQ(indices[b], expected) << b;
      }
      EXPECT_LE(std::abs(absmax[b] - exact[b]), scale * (0.9f / 64) / 2 + 1e-6f) << "half the coarsest map step";
    }
  }
}

// Every value is within half the widest gap between levels (0.152 of its block's absmax), plus what
// the 8-bit absmax moves; on N(0, 1)-like weights, the mean error is a few percent of the absmax.
TEST(Nf4Kernels, RoundTripErrorIsBoundedByTheLevelGaps) {
  const std::vector<float> master = random_vector<float>(4096 * 64, 5, 0.02);
  const Quantized q = quantized(master, {});
  const std::vector<float> values = dequantized(q);
  const std::vector<float> absmax = absmax_of(q);
  double widest_gap = 0.0;
  for (std::size_t i = 1; i < nf4::kLevels.size(); ++i)
    widest_gap = std::max(widest_gap, double{nf4::kLevels[i]} - nf4::kLevels[i - 1]);
  EXPECT_NEAR(widest_gap, 1.0 - 0.6961928009986877, 1e-7) << "between -1 and the next level";
  double total_error = 0.0, total_absmax = 0.0;
  for (std::size_t i = 0; i < master.size(); ++i) {
    float exact = 0.0f;
    for (std::size_t j = i / 64 * 64; j < i / 64 * 64 + 64; ++j) exact = std::max(exact, std::abs(master[j]));
    const double error = std::abs(double{values[i]} - master[i]);
    ASSERT_LE(error, 0.5 * widest_gap * exact + std::abs(double{absmax[i / 64]} - exact) + 1e-7) << i;
    total_error += error;
    total_absmax += exact;
  }
  const double relative = total_error / total_absmax;
  std::printf("nf4 round trip: mean |error| %.4f of the block absmax\n", relative);
  EXPECT_LT(relative, 0.05);
}

TEST(Nf4Kernels, ABlockHoldingAnInfinityOrANaNDequantizesToNaN) {
  for (const bool double_quant : {false, true})
    for (const float bad : {INFINITY, -INFINITY, NAN}) {
      std::vector<float> master = random_vector<float>(64 * 8, 7);
      master[64 * 3 + 5] = bad;
      const std::vector<float> values = dequantized(quantized(master, {64, double_quant}));
      for (std::size_t i = 0; i < values.size(); ++i) {
        // With double quantization the mean of the absmax is NaN: the whole matrix is.
        const bool expected_nan = double_quant || i / 64 == 3;
        ASSERT_EQ(std::isnan(values[i]), expected_nan) << i << (double_quant ? " double" : " f32 absmax");
      }
    }
}

TEST(Nf4Kernels, CodesPackLowNibbleFirstAndAShortLastBlockWorks) {
  // 101 values, blocks of 64: a whole block and one of 37; an odd count leaves the last high nibble 0.
  std::vector<float> master(101);
  for (std::size_t i = 0; i < master.size(); ++i) master[i] = i % 2 == 0 ? -1.0f : 1.0f;
  master[100] = 0.25f;
  const Quantized q = quantized(master, {64, false});
  EXPECT_EQ(q.codes[0], 0xf0) << "-1 is level 0 (low nibble), 1 is level 15 (high)";
  EXPECT_EQ(q.codes[50] >> 4, 0) << "no value past the end";
  const std::vector<float> values = dequantized(q);
  EXPECT_EQ(values[0], -1.0f);
  EXPECT_EQ(values[99], 1.0f);
  EXPECT_EQ(values[100], nf4::kLevels[static_cast<std::size_t>(brute_force_nearest(nf4::kLevels, 0.25))]);
}

TEST(Nf4Kernels, AnyRangeDequantizesAsTheWholeMatrix) {
  const std::vector<float> master = random_vector<float>(33 * 35, 9);
  const Quantized q = quantized(master, {});
  const std::vector<float> whole = dequantized(q);
  for (const auto& [first, count] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {0, 1}, {1, 1}, {33, 35}, {35, 66}, {63, 2}, {64, 64}, {127, 400}, {1120, 35}}) {
    std::vector<float> part(static_cast<std::size_t>(count));
    nf4::dequantize(part.data(), q.view(), q.elements, first, count);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + first)) << first << "+" << count;
  }
}

TEST(Nf4Kernels, QuantizeIsIndependentOfTheThreadCount) {
  const std::vector<float> master = random_vector<float>(640 * 768, 13);
  const int saved_threads = omp_get_max_threads();
  for (const bool double_quant : {false, true}) {
    omp_set_num_threads(1);
    const Quantized one = quantized(master, {64, double_quant});
    omp_set_num_threads(3);
    const Quantized three = quantized(master, {64, double_quant});
    EXPECT_EQ(one.codes, three.codes);
    EXPECT_EQ(one.side, three.side);
  }
  omp_set_num_threads(saved_threads);
}

TEST(Nf4Kernels, StoresFourPointOneThreeBitsAValueWithDoubleQuantization) {
  const std::int64_t elements = 4096 * 4096;
  const double bits = 8.0 * (static_cast<double>(elements) / 2 + static_cast<double>(nf4::side_bytes(elements, {}))) /
                      static_cast<double>(elements);
  EXPECT_NEAR(bits, 4.127, 0.001);
  const double single =
      8.0 * (static_cast<double>(elements) / 2 + static_cast<double>(nf4::side_bytes(elements, {64, false}))) /
      static_cast<double>(elements);
  EXPECT_NEAR(single, 4.5, 1e-9) << "an f32 absmax per 64 values";
}

struct MatmulCase {
  std::int64_t rows, in_features, out_features;
};

std::vector<double> widened(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

double relative_difference(const std::vector<float>& actual, const std::vector<double>& expected) {
  double worst = 0.0, largest = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double difference = std::abs(double{actual[i]} - expected[i]);
    worst = std::isnan(difference) ? std::numeric_limits<double>::infinity() : std::max(worst, difference);
    largest = std::max(largest, std::abs(expected[i]));
  }
  return worst / std::max(largest, 1e-30);
}

// The products on the dequantized weight, whatever the chunking (rows of odd length start blocks
// mid-row); the weight and bias gradients are the f32 path's bit for bit.
TEST(Nf4Kernels, MatmulMatchesTheReferenceOnTheDequantizedWeight) {
  constexpr double kBound = 1e-5;
  for (const MatmulCase& m : std::vector<MatmulCase>{{7, 96, 160}, {5, 64, 48}, {3, 33, 35}})
    for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
      const MatmulShape shape{m.rows, m.in_features, m.out_features, layout};
      const std::int64_t row_length = layout == WeightLayout::in_out ? m.out_features : m.in_features;
      const std::int64_t weight_size = m.in_features * m.out_features;
      const std::vector<float> master = random_vector<float>(static_cast<std::size_t>(weight_size), 21);
      const Quantized q = quantized(master, {});
      const std::vector<float> weight_f32 = dequantized(q);
      const std::vector<double> weight = widened(weight_f32);
      const std::vector<float> inp = random_vector<float>(static_cast<std::size_t>(m.rows * m.in_features), 22);
      const std::vector<float> dout = random_vector<float>(static_cast<std::size_t>(m.rows * m.out_features), 23);
      const std::vector<float> bias = random_vector<float>(static_cast<std::size_t>(m.out_features), 24);
      const std::vector<float> dinp_start = random_vector<float>(inp.size(), 25);
      const std::vector<double> inp_d = widened(inp), dout_d = widened(dout), bias_d = widened(bias);
      for (const std::int64_t scratch_elements : {std::int64_t{1}, row_length * 3 / 2, weight_size}) {
        SCOPED_TRACE(std::string(layout == WeightLayout::in_out ? "in_out" : "out_in") +
                     " C=" + std::to_string(m.in_features) + " scratch " + std::to_string(scratch_elements));
        std::vector<float> scratch(static_cast<std::size_t>(std::max(scratch_elements, row_length)));
        std::vector<float> out(static_cast<std::size_t>(m.rows * m.out_features), std::nanf(""));
        nf4::matmul_forward(out.data(), inp.data(), q.view(), bias.data(), shape, scratch.data(), scratch_elements);
        std::vector<double> out_expected(out.size());
        cpu::reference::matmul_forward<double>(out_expected.data(), inp_d.data(), weight.data(), bias_d.data(), m.rows,
                                               m.in_features, m.out_features, layout);
        EXPECT_LT(relative_difference(out, out_expected), kBound) << "forward";

        std::vector<float> dinp = dinp_start, dweight(master.size(), 0.0f), dbias(bias.size(), 0.0f);
        nf4::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), q.view(), shape,
                             scratch.data(), scratch_elements, GradientWrite::accumulate);
        std::vector<double> dinp_expected = widened(dinp_start), dweight_expected(master.size(), 0.0),
                            dbias_expected(bias.size(), 0.0);
        cpu::reference::matmul_backward<double>(dinp_expected.data(), dweight_expected.data(), dbias_expected.data(),
                                                dout_d.data(), inp_d.data(), weight.data(), m.rows, m.in_features,
                                                m.out_features, layout);
        EXPECT_LT(relative_difference(dinp, dinp_expected), kBound) << "dinp";
        std::vector<float> dweight_f32(master.size(), 0.0f), dbias_f32(bias.size(), 0.0f);
        cpu::matmul_backward(nullptr, dweight_f32.data(), dbias_f32.data(), dout.data(), inp.data(), weight_f32.data(),
                             m.rows, m.in_features, m.out_features, layout);
        EXPECT_EQ(dweight, dweight_f32);
        EXPECT_EQ(dbias, dbias_f32);
      }
    }
}

}  // namespace
}  // namespace strata
