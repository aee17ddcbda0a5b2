// The int8 weight plugin's CPU kernels: absmax quantization round trips within half a scale in both
// layouts and granularities; the matmuls with an int8 weight match the reference matmul (in double)
// on the dequantized weight over chunk sizes, bias, and overwritten or accumulated input gradients;
// the weight and bias gradients are the f32 path's bit for bit, since they do not read the weight.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/cpu/matmul.hpp"
#include "plugins/int8/cpu/int8_weights_cpu.hpp"

namespace strata {
namespace {

using cpu::test::random_vector;

const char* layout_name(WeightLayout layout) {
  return layout == WeightLayout::in_out ? "in_out" : "out_in";
}

std::int64_t stored_row_length(std::int64_t in_features, std::int64_t out_features, WeightLayout layout) {
  return layout == WeightLayout::in_out ? out_features : in_features;
}

// Which scale covers stored element (row, column).
std::int64_t scale_index(std::int64_t row, std::int64_t column, std::int64_t row_length, WeightLayout layout,
                         std::int64_t group_size) {
  if (group_size == 0) return layout == WeightLayout::in_out ? column : row;
  return (row * row_length + column) / group_size;
}

struct Quantized {
  std::vector<std::int8_t> values;
  std::vector<float> scales;
  std::int64_t group_size = 0;

  int8::ConstInt8Matrix view() const { return {values.data(), scales.data(), group_size}; }
};

Quantized quantized(const std::vector<float>& master, std::int64_t in_features, std::int64_t out_features,
                    WeightLayout layout, std::int64_t group_size) {
  Quantized q;
  q.group_size = group_size;
  q.values.assign(master.size(), std::int8_t{99});
  q.scales.assign(static_cast<std::size_t>(int8::scale_count(in_features, out_features, layout, group_size)), -1.0f);
  int8::quantize({q.values.data(), q.scales.data(), group_size}, master.data(), in_features, out_features, layout);
  return q;
}

std::vector<float> dequantized(const Quantized& q, std::int64_t in_features, std::int64_t out_features,
                               WeightLayout layout) {
  std::vector<float> out(q.values.size(), std::numeric_limits<float>::quiet_NaN());
  int8::dequantize(out.data(), q.view(), in_features, out_features, layout);
  return out;
}

std::vector<double> widened(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// max |actual - expected| over max |expected|.
double relative_difference(const std::vector<float>& actual, const std::vector<double>& expected) {
  double worst = 0.0, largest = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double difference = std::abs(double{actual[i]} - expected[i]);
    worst = std::isnan(difference) ? std::numeric_limits<double>::infinity() : std::max(worst, difference);
    largest = std::max(largest, std::abs(expected[i]));
  }
  return worst / std::max(largest, 1e-30);
}

// Makes the first (or the last) element of every group, in stored order, its absmax: 1.5 times the
// largest of the others, so a quantizer that skips a group's first or last element gets it wrong.
std::vector<float> with_planted_maxima(std::vector<float> master, std::int64_t row_length, WeightLayout layout,
                                       std::int64_t group_size, std::int64_t group_count, bool at_first) {
  std::vector<float> largest(static_cast<std::size_t>(group_count), 0.0f);
  std::vector<std::size_t> planted(largest.size(), master.size());
  for (std::size_t i = 0; i < master.size(); ++i) {
    const auto index = static_cast<std::int64_t>(i);
    const auto g =
        static_cast<std::size_t>(scale_index(index / row_length, index % row_length, row_length, layout, group_size));
    largest[g] = std::max(largest[g], std::abs(master[i]));
    if (!at_first || planted[g] == master.size()) planted[g] = i;
  }
  for (std::size_t g = 0; g < planted.size(); ++g)
    master[planted[g]] = std::copysign(1.5f * largest[g], master[planted[g]]);
  return master;
}

// Every element within half its group's scale; each scale is its group's absmax / 127; a nonzero
// group reaches |q| = 127; zero groups (a stored row and an output feature here) stay exactly zero.
TEST(Int8Kernels, QuantizeRoundTripsWithinHalfAScale) {
  const std::int64_t in_features = 256, out_features = 384;
  const std::int64_t zero_row = 3, zero_output = 5;
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    const std::int64_t row_length = stored_row_length(in_features, out_features, layout);
    const std::int64_t stored_rows = in_features * out_features / row_length;
    // Magnitudes that differ by stored row, so groups have very different scales.
    std::vector<float> base = random_vector<float>(static_cast<std::size_t>(in_features * out_features), 11);
    for (std::int64_t r = 0; r < stored_rows; ++r)
      for (std::int64_t k = 0; k < row_length; ++k)
        base[r * row_length + k] *= std::ldexp(1.0f, static_cast<int>(r % 9) - 4);
    for (std::int64_t k = 0; k < row_length; ++k) base[zero_row * row_length + k] = 0.0f;
    for (std::int64_t c = 0; c < in_features; ++c) {
      const std::int64_t index =
          layout == WeightLayout::in_out ? c * out_features + zero_output : zero_output * in_features + c;
      base[index] = 0.0f;
    }
    for (const std::int64_t group_size : {std::int64_t{0}, std::int64_t{32}, std::int64_t{64}, std::int64_t{128}})
      for (const bool at_first : {true, false}) {
        SCOPED_TRACE(std::string(layout_name(layout)) + ", group_size " + std::to_string(group_size) +
                     (at_first ? ", absmax first in each group" : ", absmax last in each group"));
        const std::vector<float> master =
            with_planted_maxima(base, row_length, layout, group_size,
                                int8::scale_count(in_features, out_features, layout, group_size), at_first);
        const Quantized q = quantized(master, in_features, out_features, layout, group_size);
        const std::vector<float> back = dequantized(q, in_features, out_features, layout);
        ASSERT_EQ(q.scales.size(),
                  static_cast<std::size_t>(group_size == 0 ? out_features : in_features * out_features / group_size));

        std::vector<float> absmax(q.scales.size(), 0.0f);
        std::vector<int> max_q(q.scales.size(), 0);
        double worst_ratio = 0.0;  // |x - dequantized| / scale
        for (std::int64_t r = 0; r < stored_rows; ++r)
          for (std::int64_t k = 0; k < row_length; ++k) {
            const std::int64_t i = r * row_length + k;
            const auto g = static_cast<std::size_t>(scale_index(r, k, row_length, layout, group_size));
            absmax[g] = std::max(absmax[g], std::abs(master[i]));
            max_q[g] = std::max(max_q[g], std::abs(int{q.values[i]}));
            const double error = std::abs(double{back[i]} - double{master[i]});
            if (q.scales[g] > 0.0f) worst_ratio = std::max(worst_ratio, error / q.scales[g]);
            if (master[i] == 0.0f) {
              ASSERT_EQ(back[i], 0.0f) << "stored (" << r << ", " << k << ")";
              ASSERT_EQ(q.values[i], 0);
            }
          }
        std::printf("%s group_size %3lld, absmax %s: worst |x - dequantized| = %.7f scale\n", layout_name(layout),
                    static_cast<long long>(group_size), at_first ? "first" : "last ", worst_ratio);
        // Half a scale, plus the two f32 roundings on the way (x / scale and q * scale), each at most
        // half an ulp of a value near 127 (in units of the scale): 2^-17 together.
        EXPECT_LE(worst_ratio, 0.5 + 0x1p-17);
        for (std::size_t g = 0; g < q.scales.size(); ++g) {
          ASSERT_EQ(q.scales[g], absmax[g] / 127.0f) << "group " << g;
          ASSERT_EQ(max_q[g], absmax[g] > 0.0f ? 127 : 0) << "group " << g;
        }
        std::size_t zero_groups = 0;
        for (const float scale : q.scales) zero_groups += scale == 0.0f ? 1 : 0;
        EXPECT_GE(zero_groups, 1u) << "the test needs an all-zero group";
      }
  }
}

// scale 1: q is x rounded to nearest, ties to even (0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 126.5 -> 126).
TEST(Int8Kernels, QuantizeRoundsTiesToEven) {
  const std::vector<float> master = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -0.5f, 126.5f, -127.0f};
  const Quantized q = quantized(master, 8, 1, WeightLayout::out_in, 8);
  ASSERT_EQ(q.scales, std::vector<float>{1.0f});
  EXPECT_EQ(q.values, (std::vector<std::int8_t>{127, 0, 2, 2, -2, 0, 126, -127}));
}

// An infinity or a NaN in the master copy makes its group's scale NaN and its q 0, so the
// dequantized group is NaN (which the all-finite check sees) and no other group changes.
TEST(Int8Kernels, NonFiniteGroupDequantizesToNaN) {
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in})
    for (const std::int64_t group_size : {std::int64_t{0}, std::int64_t{16}}) {
      SCOPED_TRACE(std::string(layout_name(layout)) + ", group_size " + std::to_string(group_size));
      const std::int64_t in_features = 32, out_features = 48;
      const std::int64_t row_length = stored_row_length(in_features, out_features, layout);
      std::vector<float> master = random_vector<float>(static_cast<std::size_t>(in_features * out_features), 12);
      master[2 * row_length + 7] = std::numeric_limits<float>::infinity();
      master[5 * row_length + 9] = std::numeric_limits<float>::quiet_NaN();
      const Quantized q = quantized(master, in_features, out_features, layout, group_size);
      const std::vector<float> back = dequantized(q, in_features, out_features, layout);
      const std::int64_t bad_a = scale_index(2, 7, row_length, layout, group_size);
      const std::int64_t bad_b = scale_index(5, 9, row_length, layout, group_size);
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(master.size()); ++i) {
        const std::int64_t g = scale_index(i / row_length, i % row_length, row_length, layout, group_size);
        if (g == bad_a || g == bad_b) {
          ASSERT_TRUE(std::isnan(back[i])) << i;
          ASSERT_EQ(q.values[i], 0) << i;
        } else {
          ASSERT_TRUE(std::isfinite(back[i])) << i;
        }
      }
    }
}

TEST(Int8Kernels, QuantizeIsIndependentOfTheThreadCount) {
  const std::int64_t in_features = 640, out_features = 768;
  const std::vector<float> master = random_vector<float>(static_cast<std::size_t>(in_features * out_features), 13);
  const int saved_threads = omp_get_max_threads();
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in})
    for (const std::int64_t group_size : {std::int64_t{0}, std::int64_t{64}}) {
      omp_set_num_threads(1);
      const Quantized one = quantized(master, in_features, out_features, layout, group_size);
      omp_set_num_threads(3);
      const Quantized three = quantized(master, in_features, out_features, layout, group_size);
      EXPECT_EQ(one.values, three.values) << layout_name(layout) << " " << group_size;
      EXPECT_EQ(one.scales, three.scales) << layout_name(layout) << " " << group_size;
    }
  omp_set_num_threads(saved_threads);
}

struct MatmulCase {
  std::int64_t rows, in_features, out_features, group_size;
};

// The int8 matmuls compute the reference products (in double) on the dequantized weight, up to f32
// rounding, whatever the chunking: scratch of one float still dequantizes one whole stored row.
TEST(Int8Kernels, MatmulMatchesTheReferenceOnTheDequantizedWeight) {
  constexpr double kBound = 1e-5;
  const std::vector<MatmulCase> cases = {{7, 96, 160, 0}, {7, 96, 160, 32}, {5, 64, 48, 0}, {5, 64, 48, 16}};
  double worst = 0.0;
  for (const MatmulCase& m : cases)
    for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
      const MatmulShape shape{m.rows, m.in_features, m.out_features, layout};
      const std::int64_t row_length = stored_row_length(m.in_features, m.out_features, layout);
      const std::int64_t weight_size = m.in_features * m.out_features;
      const std::vector<float> master = random_vector<float>(static_cast<std::size_t>(weight_size), 21);
      const Quantized q = quantized(master, m.in_features, m.out_features, layout, m.group_size);
      const std::vector<double> weight = widened(dequantized(q, m.in_features, m.out_features, layout));
      const std::vector<float> inp = random_vector<float>(static_cast<std::size_t>(m.rows * m.in_features), 22);
      const std::vector<float> dout = random_vector<float>(static_cast<std::size_t>(m.rows * m.out_features), 23);
      const std::vector<float> bias_values = random_vector<float>(static_cast<std::size_t>(m.out_features), 24);
      const std::vector<float> dinp_start = random_vector<float>(inp.size(), 25);
      const std::vector<float> dweight_start = random_vector<float>(master.size(), 26);
      const std::vector<float> dbias_start = random_vector<float>(bias_values.size(), 27);
      const std::vector<double> inp_d = widened(inp), dout_d = widened(dout);

      for (const std::int64_t scratch_elements : {std::int64_t{1}, row_length, row_length * 5 / 2, weight_size})
        for (const bool with_bias : {false, true})
          for (const GradientWrite write : {GradientWrite::overwrite, GradientWrite::accumulate}) {
            SCOPED_TRACE(std::string(layout_name(layout)) + " N=" + std::to_string(m.rows) +
                         " C=" + std::to_string(m.in_features) + " OC=" + std::to_string(m.out_features) + " group " +
                         std::to_string(m.group_size) + " scratch " + std::to_string(scratch_elements) +
                         (with_bias ? " bias" : " no bias") +
                         (write == GradientWrite::overwrite ? " overwrite" : " accumulate"));
            std::vector<float> scratch(static_cast<std::size_t>(std::max(scratch_elements, row_length)));
            const float* bias = with_bias ? bias_values.data() : nullptr;
            const std::vector<double> bias_d = widened(bias_values);

            // NaN in the outputs that are written, not added to: they must not be read.
            std::vector<float> out(static_cast<std::size_t>(m.rows * m.out_features),
                                   std::numeric_limits<float>::quiet_NaN());
            int8::matmul_forward(out.data(), inp.data(), q.view(), bias, shape, scratch.data(), scratch_elements);
            std::vector<double> out_expected(out.size());
            cpu::reference::matmul_forward<double>(out_expected.data(), inp_d.data(), weight.data(),
                                                   with_bias ? bias_d.data() : nullptr, m.rows, m.in_features,
                                                   m.out_features, layout);
            const double forward_error = relative_difference(out, out_expected);
            EXPECT_LT(forward_error, kBound) << "forward";

            std::vector<float> dinp = dinp_start;
            if (write == GradientWrite::overwrite) std::fill(dinp.begin(), dinp.end(), std::nanf(""));
            std::vector<float> dweight = dweight_start, dbias = dbias_start;
            int8::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), q.view(), shape,
                                  scratch.data(), scratch_elements, write);
            std::vector<double> dinp_expected(dinp.size(), 0.0);
            if (write == GradientWrite::accumulate) dinp_expected = widened(dinp_start);
            std::vector<double> dweight_expected = widened(dweight_start), dbias_expected = widened(dbias_start);
            cpu::reference::matmul_backward<double>(dinp_expected.data(), dweight_expected.data(),
                                                    dbias_expected.data(), dout_d.data(), inp_d.data(), weight.data(),
                                                    m.rows, m.in_features, m.out_features, layout);
            const double dinp_error = relative_difference(dinp, dinp_expected);
            EXPECT_LT(dinp_error, kBound) << "dinp";
            EXPECT_LT(relative_difference(dweight, dweight_expected), kBound) << "dweight";
            EXPECT_LT(relative_difference(dbias, dbias_expected), kBound) << "dbias";
            worst = std::max({worst, forward_error, dinp_error});

            // dinp alone (the weight and bias gradients null) is the same dinp.
            std::vector<float> dinp_alone = dinp_start;
            if (write == GradientWrite::overwrite) std::fill(dinp_alone.begin(), dinp_alone.end(), std::nanf(""));
            int8::matmul_backward(dinp_alone.data(), nullptr, nullptr, dout.data(), inp.data(), q.view(), shape,
                                  scratch.data(), scratch_elements, write);
            EXPECT_EQ(dinp_alone, dinp);
          }
    }
  std::printf("int8 matmul vs reference on the dequantized weight: worst relative difference %.3g (bound %.0e)\n",
              worst, kBound);
}

// The weight and bias gradients do not read the weight (null here when dinp is null): they are the
// f32 matmul_backward's bit for bit.
TEST(Int8Kernels, WeightAndBiasGradientsAreTheF32Paths) {
  const std::vector<MatmulCase> cases = {{7, 96, 160, 32}, {5, 64, 48, 0}};
  for (const MatmulCase& m : cases)
    for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in})
      for (const bool with_dinp : {false, true}) {
        SCOPED_TRACE(std::string(layout_name(layout)) + " C=" + std::to_string(m.in_features) +
                     (with_dinp ? " with dinp" : " without dinp"));
        const MatmulShape shape{m.rows, m.in_features, m.out_features, layout};
        const std::int64_t row_length = stored_row_length(m.in_features, m.out_features, layout);
        const std::vector<float> master =
            random_vector<float>(static_cast<std::size_t>(m.in_features * m.out_features), 31);
        const Quantized q = quantized(master, m.in_features, m.out_features, layout, m.group_size);
        const std::vector<float> weight = dequantized(q, m.in_features, m.out_features, layout);
        const std::vector<float> inp = random_vector<float>(static_cast<std::size_t>(m.rows * m.in_features), 32);
        const std::vector<float> dout = random_vector<float>(static_cast<std::size_t>(m.rows * m.out_features), 33);
        const std::vector<float> dweight_start = random_vector<float>(master.size(), 34);
        const std::vector<float> dbias_start = random_vector<float>(static_cast<std::size_t>(m.out_features), 35);
        std::vector<float> scratch(static_cast<std::size_t>(row_length * 2));

        std::vector<float> dweight = dweight_start, dbias = dbias_start, dinp(inp.size(), 0.0f);
        const int8::ConstInt8Matrix int8_weight =
            with_dinp ? q.view() : int8::ConstInt8Matrix{nullptr, nullptr, m.group_size};
        int8::matmul_backward(with_dinp ? dinp.data() : nullptr, dweight.data(), dbias.data(), dout.data(), inp.data(),
                              int8_weight, shape, with_dinp ? scratch.data() : nullptr,
                              with_dinp ? static_cast<std::int64_t>(scratch.size()) : 0, GradientWrite::overwrite);
        std::vector<float> dweight_f32 = dweight_start, dbias_f32 = dbias_start;
        cpu::matmul_backward(nullptr, dweight_f32.data(), dbias_f32.data(), dout.data(), inp.data(), weight.data(),
                             m.rows, m.in_features, m.out_features, layout);
        EXPECT_EQ(dweight, dweight_f32);
        EXPECT_EQ(dbias, dbias_f32);
      }
}

}  // namespace
}  // namespace strata
