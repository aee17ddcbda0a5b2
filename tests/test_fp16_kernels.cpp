// The fp16 precision plugin's CPU kernels. Conversions: every binary16 value survives the round trip,
// known f32 values round as IEEE 754 says, and the array forms (F16C where the CPU has it) give the
// scalar forms' bits on millions of values. Matmuls: equal to the reference (in double) on operands
// rounded to binary16, over layouts, bias, blocking and overwritten or accumulated input gradients;
// the rounding is real (small gradients underflow to zero unless scaled, a too large scale
// overflows); every result is independent of the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/cpu/matmul.hpp"
#include "plugins/fp16/cpu/fp16_matmul_cpu.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define STRATA_TEST_X86 1
#endif

namespace strata {
namespace {

using cpu::test::random_vector;

bool is_f16_nan(std::uint16_t bits) {
  return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
}

std::uint32_t bits_of(float value) {
  return std::bit_cast<std::uint32_t>(value);
}

// Whether the array forms run F16C here (the kernels ask the CPU the same way).
bool cpu_runs_f16c() {
#ifdef STRATA_TEST_X86
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

TEST(Fp16Conversion, EveryHalfWidensAndNarrowsBackToItself) {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t h = 0; h < all.size(); ++h) all[h] = static_cast<std::uint16_t>(h);
  std::vector<float> widened(all.size());
  fp16::widen(widened.data(), all.data(), static_cast<std::int64_t>(all.size()));
  std::vector<std::uint16_t> back(all.size());
  fp16::narrow(back.data(), widened.data(), static_cast<std::int64_t>(all.size()));
  for (std::size_t h = 0; h < all.size(); ++h) {
    const float scalar = fp16::f16_to_f32(all[h]);
    ASSERT_EQ(bits_of(widened[h]), bits_of(scalar)) << "array and scalar widen of " << h;
    if (is_f16_nan(all[h])) {
      ASSERT_TRUE(std::isnan(scalar)) << h;
      ASSERT_TRUE(is_f16_nan(fp16::f32_to_f16(scalar))) << h;
      ASSERT_TRUE(is_f16_nan(back[h])) << h;
      // Quieted, payload kept: a signalling binary16 NaN comes back with the quiet bit set.
      ASSERT_EQ(fp16::f32_to_f16(scalar), static_cast<std::uint16_t>(all[h] | 0x200u)) << h;
    } else {
      ASSERT_EQ(fp16::f32_to_f16(scalar), all[h]) << h;
      ASSERT_EQ(back[h], all[h]) << h;
    }
  }
  EXPECT_EQ(fp16::f16_to_f32(0x3c00u), 1.0f);
  EXPECT_EQ(fp16::f16_to_f32(0x7bffu), 65504.0f);
  EXPECT_EQ(fp16::f16_to_f32(0x0001u), 0x1p-24f);
  EXPECT_EQ(fp16::f16_to_f32(0x03ffu), 1023 * 0x1p-24f);
  EXPECT_EQ(fp16::f16_to_f32(0x0400u), 0x1p-14f);
  EXPECT_EQ(fp16::f16_to_f32(0xc000u), -2.0f);
  EXPECT_EQ(bits_of(fp16::f16_to_f32(0x8000u)), 0x80000000u);
  EXPECT_EQ(fp16::f16_to_f32(0xfc00u), -std::numeric_limits<float>::infinity());
}

TEST(Fp16Conversion, NarrowsKnownValuesAsIeeeSays) {
  struct Known {
    float value;
    std::uint16_t bits;
  };
  const float infinity = std::numeric_limits<float>::infinity();
  const std::vector<Known> known = {
      {1.0f, 0x3c00u},
      {-2.0f, 0xc000u},
      {0.0f, 0x0000u},
      {-0.0f, 0x8000u},
      {65504.0f, 0x7bffu},                               // largest finite
      {std::nextafter(65520.0f, 0.0f), 0x7bffu},         // just under the overflow tie
      {65520.0f, 0x7c00u},                               // the tie overflows (to even: infinity)
      {-65520.0f, 0xfc00u},                              //
      {1e10f, 0x7c00u},                                  //
      {infinity, 0x7c00u},                               //
      {-infinity, 0xfc00u},                              //
      {0x1p-24f, 0x0001u},                               // smallest subnormal
      {0x1p-25f, 0x0000u},                               // half of it: ties to even zero
      {-0x1p-25f, 0x8000u},                              //
      {std::nextafter(0x1p-25f, 1.0f), 0x0001u},         // just over the tie
      {3 * 0x1p-26f, 0x0001u},                           // 0.75 units rounds up to 1
      {3 * 0x1p-25f, 0x0002u},                           // 1.5 units: tie to even 2
      {5 * 0x1p-25f, 0x0002u},                           // 2.5 units: tie to even 2
      {0x1p-14f, 0x0400u},                               // smallest normal
      {0x1p-14f - 0x1p-25f, 0x0400u},                    // 1023.5 units: tie carries into the normals
      {0x1p-14f - 0x1p-24f, 0x03ffu},                    // largest subnormal
      {1.0f + 0x1p-11f, 0x3c00u},                        // tie to even (down)
      {1.0f + 3 * 0x1p-11f, 0x3c02u},                    // tie to even (up)
      {std::nextafter(1.0f + 0x1p-11f, 2.0f), 0x3c01u},  // just over the tie
      {std::nextafter(1.0f + 0x1p-11f, 0.0f), 0x3c00u},  // just under
      {2047.5f, 0x6800u},                                // tie to even carries into the next binade
      {0x1p-130f, 0x0000u},                              // an f32 subnormal
      {-0x1p-149f, 0x8000u},                             //
      {std::numeric_limits<float>::max(), 0x7c00u},      //
  };
  for (const Known& k : known)
    EXPECT_EQ(fp16::f32_to_f16(k.value), k.bits)
        << std::hexfloat << k.value << " (bits " << std::hex << bits_of(k.value) << ")";
  // NaN stays NaN, sign and top payload bits kept, quieted: a signalling f32 NaN whose payload sits
  // only in the dropped bits must not turn into an infinity.
  EXPECT_EQ(fp16::f32_to_f16(std::bit_cast<float>(0x7fc00000u)), 0x7e00u);
  EXPECT_EQ(fp16::f32_to_f16(std::bit_cast<float>(0xffc00000u)), 0xfe00u);
  EXPECT_EQ(fp16::f32_to_f16(std::bit_cast<float>(0x7f800001u)), 0x7e00u);
  EXPECT_EQ(fp16::f32_to_f16(std::bit_cast<float>(0x7fa02000u)), 0x7f01u);
}

// Random bit patterns (every exponent, f32 subnormals and NaN included), exact ties and their
// neighbours between adjacent binary16 values, and the specials.
std::vector<float> conversion_probe_values() {
  std::mt19937 generator(41);
  std::vector<float> values;
  for (int i = 0; i < 3'000'000; ++i) values.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(generator())));
  for (int i = 0; i < 300'000; ++i) {
    const auto h = static_cast<std::uint16_t>(generator() & 0x7bfeu);
    const float tie = std::bit_cast<float>(
        (bits_of(fp16::f16_to_f32(h)) + bits_of(fp16::f16_to_f32(static_cast<std::uint16_t>(h + 1u)))) / 2);
    const float sign = (generator() & 1u) != 0 ? -1.0f : 1.0f;
    for (const float v : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 1e9f)}) values.push_back(sign * v);
  }
  const float infinity = std::numeric_limits<float>::infinity();
  for (const float v :
       {0.0f, -0.0f, infinity, -infinity, 65504.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1p-14f,
        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
        std::numeric_limits<float>::quiet_NaN(), std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xff812345u)})
    values.push_back(v);
  return values;
}

TEST(Fp16Conversion, ArrayFormsGiveTheScalarFormsBits) {
  if (!cpu_runs_f16c())
    GTEST_SKIP() << "no F16C on this CPU: the array forms run the scalar forms, so there is no second path to "
                    "compare (the scalar forms are tested by the other conversion tests)";
  const std::vector<float> values = conversion_probe_values();
  const auto count = static_cast<std::int64_t>(values.size());
  std::vector<std::uint16_t> narrowed(values.size());
  fp16::narrow(narrowed.data(), values.data(), count);
  std::vector<float> rounded(values.size());
  fp16::round_to_f16(rounded.data(), values.data(), count);
  std::vector<float> in_place = values;
  fp16::round_to_f16(in_place.data(), in_place.data(), count);
  std::vector<float> widened(values.size());
  fp16::widen(widened.data(), narrowed.data(), count);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint16_t expected = fp16::f32_to_f16(values[i]);
    const std::uint32_t expected_rounded = bits_of(fp16::f16_to_f32(expected));
    if (narrowed[i] != expected || bits_of(rounded[i]) != expected_rounded ||
        bits_of(in_place[i]) != expected_rounded || bits_of(widened[i]) != expected_rounded) {
      if (++mismatches <= 5)
        ADD_FAILURE() << "f32 bits " << std::hex << bits_of(values[i]) << ": narrow " << narrowed[i] << " vs scalar "
                      << expected << ", round " << bits_of(rounded[i]) << " / in place " << bits_of(in_place[i])
                      << " vs scalar " << expected_rounded;
    }
  }
  std::printf("F16C array conversions vs scalar on %zu values: %zu mismatches\n", values.size(), mismatches);
  EXPECT_EQ(mismatches, 0u);
}

#ifdef STRATA_TEST_X86
// Flush-to-zero and denormals-are-zero (set by some libraries, or by -ffast-math start-up code) do
// not change the conversions: F16C ignores them for binary16 subnormals, the scalar forms compute in
// integers. Fewer values than one conversion task, so the calling thread (whose MXCSR is set here)
// converts them all.
TEST(Fp16Conversion, FlushToZeroModesChangeNoConversion) {
  std::vector<float> values;
  for (std::uint32_t units = 0; units <= 1100; ++units) {
    values.push_back(static_cast<float>(units) * 0x1p-25f);
    values.push_back(-static_cast<float>(units) * 0x1p-24f);
  }
  for (const float v : {0x1p-130f, -0x1p-149f, 0x1p-126f}) values.push_back(v);
  const auto count = static_cast<std::int64_t>(values.size());
  std::vector<std::uint16_t> halves(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) halves[i] = fp16::f32_to_f16(values[i]);

  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  std::vector<std::uint16_t> narrowed(values.size());
  fp16::narrow(narrowed.data(), values.data(), count);
  std::vector<float> widened(values.size()), rounded(values.size());
  fp16::widen(widened.data(), halves.data(), count);
  fp16::round_to_f16(rounded.data(), values.data(), count);
  _mm_setcsr(saved);

  for (std::size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(narrowed[i], halves[i]) << std::hexfloat << values[i];
    ASSERT_EQ(bits_of(widened[i]), bits_of(fp16::f16_to_f32(halves[i]))) << std::hexfloat << values[i];
    ASSERT_EQ(bits_of(rounded[i]), bits_of(fp16::f16_to_f32(halves[i]))) << std::hexfloat << values[i];
  }
}
#endif

const char* layout_name(WeightLayout layout) {
  return layout == WeightLayout::in_out ? "in_out" : "out_in";
}

std::vector<std::uint16_t> narrowed(const std::vector<float>& values) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = fp16::f32_to_f16(values[i]);
  return out;
}

// Values as the binary16 operand holds them, by the scalar forms.
std::vector<double> rounded_to_f16(const std::vector<float>& values) {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = fp16::f16_to_f32(fp16::f32_to_f16(values[i]));
  return out;
}

std::vector<double> widened(const std::vector<std::uint16_t>& halves) {
  std::vector<double> out(halves.size());
  for (std::size_t i = 0; i < halves.size(); ++i) out[i] = fp16::f16_to_f32(halves[i]);
  return out;
}

std::vector<double> widened(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// max |actual - expected| over max |expected|; a NaN counts as infinitely wrong.
double relative_difference(const std::vector<float>& actual, const std::vector<double>& expected) {
  double worst = 0.0, largest = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double difference = std::abs(double{actual[i]} - expected[i]);
    worst = std::isnan(difference) ? std::numeric_limits<double>::infinity() : std::max(worst, difference);
    largest = std::max(largest, std::abs(expected[i]));
  }
  return worst / std::max(largest, 1e-30);
}

std::vector<float> nan_filled(std::size_t count) {
  return std::vector<float>(count, std::numeric_limits<float>::quiet_NaN());
}

struct MatmulCase {
  std::int64_t rows, in_features, out_features;
};

// The f16 matmuls compute the reference products (in double) on the binary16 weight and the
// binary16-rounded inp and dout, up to f32 accumulation, whatever the blocking: the smallest
// scratch (2 * max(C, OC)) runs one row and one stored row at a time.
TEST(Fp16Kernels, MatmulMatchesTheReferenceOnRoundedOperands) {
  constexpr double kBound = 1e-5;
  const std::vector<MatmulCase> cases = {{1, 24, 40}, {37, 24, 40}, {37, 40, 24}, {8, 64, 48}, {19, 96, 160}};
  double worst = 0.0;
  for (const MatmulCase& m : cases)
    for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
      const MatmulShape shape{m.rows, m.in_features, m.out_features, layout};
      const std::int64_t widest = std::max(m.in_features, m.out_features);
      const std::int64_t weight_size = m.in_features * m.out_features;
      const std::vector<std::uint16_t> weight =
          narrowed(random_vector<float>(static_cast<std::size_t>(weight_size), 51));
      const std::vector<double> weight_d = widened(weight);
      const std::vector<float> inp = random_vector<float>(static_cast<std::size_t>(m.rows * m.in_features), 52, 2.0);
      const std::vector<float> dout = random_vector<float>(static_cast<std::size_t>(m.rows * m.out_features), 53);
      const std::vector<float> bias_values = random_vector<float>(static_cast<std::size_t>(m.out_features), 54);
      const std::vector<float> dinp_start = random_vector<float>(inp.size(), 55);
      const std::vector<float> dweight_start = random_vector<float>(weight.size(), 56);
      const std::vector<float> dbias_start = random_vector<float>(bias_values.size(), 57);
      const std::vector<double> inp_d = rounded_to_f16(inp), dout_d = rounded_to_f16(dout);
      const std::vector<double> bias_d = widened(bias_values);

      const std::int64_t everything = m.rows * (m.in_features + m.out_features) + weight_size;
      for (const std::int64_t scratch_elements :
           {2 * widest, 3 * widest + 5, 5 * widest + 1, 11 * widest + 7, everything})
        for (const bool with_bias : {false, true})
          for (const GradientWrite write : {GradientWrite::overwrite, GradientWrite::accumulate}) {
            SCOPED_TRACE(std::string(layout_name(layout)) + " N=" + std::to_string(m.rows) +
                         " C=" + std::to_string(m.in_features) + " OC=" + std::to_string(m.out_features) + " scratch " +
                         std::to_string(scratch_elements) + (with_bias ? " bias" : " no bias") +
                         (write == GradientWrite::overwrite ? " overwrite" : " accumulate"));
            std::vector<float> scratch = nan_filled(static_cast<std::size_t>(scratch_elements));
            const float* bias = with_bias ? bias_values.data() : nullptr;

            // NaN in the outputs that are written, not added to: they must not be read.
            std::vector<float> out = nan_filled(static_cast<std::size_t>(m.rows * m.out_features));
            fp16::matmul_forward(out.data(), inp.data(), weight.data(), bias, shape, scratch.data(), scratch_elements);
            std::vector<double> out_expected(out.size());
            cpu::reference::matmul_forward<double>(out_expected.data(), inp_d.data(), weight_d.data(),
                                                   with_bias ? bias_d.data() : nullptr, m.rows, m.in_features,
                                                   m.out_features, layout);
            const double forward_error = relative_difference(out, out_expected);
            EXPECT_LT(forward_error, kBound) << "forward";

            std::vector<float> dinp = write == GradientWrite::overwrite ? nan_filled(inp.size()) : dinp_start;
            std::vector<float> dweight = dweight_start, dbias = dbias_start;
            fp16::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(),
                                  shape, scratch.data(), scratch_elements, write);
            std::vector<double> dinp_expected(dinp.size(), 0.0);
            if (write == GradientWrite::accumulate) dinp_expected = widened(dinp_start);
            std::vector<double> dweight_expected = widened(dweight_start), dbias_expected = widened(dbias_start);
            cpu::reference::matmul_backward<double>(dinp_expected.data(), dweight_expected.data(),
                                                    dbias_expected.data(), dout_d.data(), inp_d.data(), weight_d.data(),
                                                    m.rows, m.in_features, m.out_features, layout);
            const double dinp_error = relative_difference(dinp, dinp_expected);
            const double dweight_error = relative_difference(dweight, dweight_expected);
            const double dbias_error = relative_difference(dbias, dbias_expected);
            EXPECT_LT(dinp_error, kBound) << "dinp";
            EXPECT_LT(dweight_error, kBound) << "dweight";
            EXPECT_LT(dbias_error, kBound) << "dbias";
            worst = std::max({worst, forward_error, dinp_error, dweight_error, dbias_error});

            // Each gradient alone is the same, bit for bit: dinp with the other two null, and the
            // weight and bias gradients with dinp and the weight null.
            std::vector<float> dinp_alone = write == GradientWrite::overwrite ? nan_filled(inp.size()) : dinp_start;
            fp16::matmul_backward(dinp_alone.data(), nullptr, nullptr, dout.data(), inp.data(), weight.data(), shape,
                                  scratch.data(), scratch_elements, write);
            EXPECT_EQ(dinp_alone, dinp);
            std::vector<float> dweight_alone = dweight_start, dbias_alone = dbias_start;
            fp16::matmul_backward(nullptr, dweight_alone.data(), dbias_alone.data(), dout.data(), inp.data(), nullptr,
                                  shape, scratch.data(), scratch_elements, write);
            EXPECT_EQ(dweight_alone, dweight);
            EXPECT_EQ(dbias_alone, dbias);
          }
    }
  std::printf("fp16 matmul vs reference on rounded operands: worst relative difference %.3g (bound %.0e)\n", worst,
              kBound);
}

// A phase computed with bf16 or f32 operands rounds the activation operands (inp, dout) to bf16, or
// not at all; the f16 weight is read the same. Both layouts, forward and backward.
TEST(Fp16Kernels, OtherOperandFormatsRoundTheActivationOperandsAccordingly) {
  constexpr std::int64_t N = 13, C = 24, OC = 40;
  const std::vector<std::uint16_t> weight = narrowed(random_vector<float>(C * OC, 61));
  const std::vector<double> weight_d = widened(weight);
  const std::vector<float> inp = random_vector<float>(N * C, 62, 2.0);
  const std::vector<float> dout = random_vector<float>(N * OC, 63);
  std::vector<float> scratch(4096);
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in})
    for (const fp16::Operands operands : {fp16::Operands::bf16, fp16::Operands::f32}) {
      SCOPED_TRACE(std::string(layout_name(layout)) + (operands == fp16::Operands::bf16 ? " bf16" : " f32"));
      const auto rounded = [&](const std::vector<float>& values) {
        std::vector<double> out(values.size());
        for (std::size_t i = 0; i < values.size(); ++i)
          out[i] = operands == fp16::Operands::bf16 ? bf16_to_f32(f32_to_bf16(values[i])) : values[i];
        return out;
      };
      const std::vector<double> inp_d = rounded(inp), dout_d = rounded(dout);
      const MatmulShape shape{N, C, OC, layout};
      const auto scratch_elements = static_cast<std::int64_t>(scratch.size());
      std::vector<float> out(N * OC);
      fp16::matmul_forward(out.data(), inp.data(), weight.data(), nullptr, shape, scratch.data(), scratch_elements,
                           operands);
      std::vector<double> out_expected(out.size());
      cpu::reference::matmul_forward<double>(out_expected.data(), inp_d.data(), weight_d.data(), nullptr, N, C, OC,
                                             layout);
      EXPECT_LT(relative_difference(out, out_expected), 1e-6) << "forward";
      std::vector<float> dinp(N * C, 0.0f), dweight(C * OC, 0.0f), dbias(OC, 0.0f);
      fp16::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), shape,
                            scratch.data(), scratch_elements, GradientWrite::overwrite, operands);
      std::vector<double> dinp_expected(dinp.size(), 0.0), dweight_expected(dweight.size(), 0.0),
          dbias_expected(dbias.size(), 0.0);
      cpu::reference::matmul_backward<double>(dinp_expected.data(), dweight_expected.data(), dbias_expected.data(),
                                              dout_d.data(), inp_d.data(), weight_d.data(), N, C, OC, layout);
      EXPECT_LT(relative_difference(dinp, dinp_expected), 1e-6) << "dinp";
      EXPECT_LT(relative_difference(dweight, dweight_expected), 1e-6) << "dweight";
      EXPECT_LT(relative_difference(dbias, dbias_expected), 1e-6) << "dbias";
    }
}

// The rounding of dout is real: gradients around 1e-8 lie below half the smallest binary16
// subnormal and vanish, so the weight gradient is exactly zero; scaled by 65536 (a loss scale) they
// survive, and dweight / 65536 is the f32 one to binary16 precision. Scaled by 2^20 instead, gradients
// near 1 overflow to infinity and the weight gradient is not finite.
TEST(Fp16Kernels, SmallGradientsUnderflowUnlessScaled) {
  constexpr double kScaledBound = 1e-3;
  const MatmulCase m{16, 32, 24};
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in}) {
    SCOPED_TRACE(layout_name(layout));
    const MatmulShape shape{m.rows, m.in_features, m.out_features, layout};
    const std::vector<std::uint16_t> weight =
        narrowed(random_vector<float>(static_cast<std::size_t>(m.in_features * m.out_features), 61));
    const std::vector<float> inp = random_vector<float>(static_cast<std::size_t>(m.rows * m.in_features), 62);
    const std::vector<float> tiny = random_vector<float>(static_cast<std::size_t>(m.rows * m.out_features), 63, 2.5e-8);
    std::vector<float> scratch(static_cast<std::size_t>(4 * std::max(m.in_features, m.out_features)));
    const auto scratch_elements = static_cast<std::int64_t>(scratch.size());

    std::vector<float> dinp(inp.size(), 1.0f), dweight(weight.size(), 0.0f), dbias(m.out_features, 0.0f);
    fp16::matmul_backward(dinp.data(), dweight.data(), dbias.data(), tiny.data(), inp.data(), weight.data(), shape,
                          scratch.data(), scratch_elements, GradientWrite::overwrite);
    EXPECT_TRUE(std::all_of(dweight.begin(), dweight.end(), [](float v) { return v == 0.0f; }));
    EXPECT_TRUE(std::all_of(dbias.begin(), dbias.end(), [](float v) { return v == 0.0f; }));
    EXPECT_TRUE(std::all_of(dinp.begin(), dinp.end(), [](float v) { return v == 0.0f; }));

    std::vector<float> scaled = tiny;
    for (float& v : scaled) v *= 65536.0f;
    std::vector<float> dweight_scaled(weight.size(), 0.0f), dinp_scaled(inp.size(), 0.0f);
    fp16::matmul_backward(dinp_scaled.data(), dweight_scaled.data(), nullptr, scaled.data(), inp.data(), weight.data(),
                          shape, scratch.data(), scratch_elements, GradientWrite::overwrite);
    for (float& v : dweight_scaled) v /= 65536.0f;
    for (float& v : dinp_scaled) v /= 65536.0f;
    // The f32 path's gradients on the unscaled, unrounded values (weight as stored), in double.
    std::vector<double> dweight_f32(weight.size(), 0.0), dinp_f32(inp.size(), 0.0);
    const std::vector<double> tiny_d = widened(tiny), inp_d = widened(inp), weight_d = widened(weight);
    cpu::reference::matmul_backward<double>(dinp_f32.data(), dweight_f32.data(), nullptr, tiny_d.data(), inp_d.data(),
                                            weight_d.data(), m.rows, m.in_features, m.out_features, layout);
    const double dweight_error = relative_difference(dweight_scaled, dweight_f32);
    const double dinp_error = relative_difference(dinp_scaled, dinp_f32);
    std::printf("%s, dout ~1e-8 scaled by 65536: dweight / 65536 vs f32 %.3g, dinp / 65536 vs f32 %.3g (bound %.0e)\n",
                layout_name(layout), dweight_error, dinp_error, kScaledBound);
    EXPECT_LT(dweight_error, kScaledBound);
    EXPECT_LT(dinp_error, kScaledBound);
    EXPECT_GT(dweight_error, 0.0) << "binary16 rounding should leave a trace";

    std::vector<float> huge = random_vector<float>(tiny.size(), 64);
    for (float& v : huge) v *= 0x1p20f;
    std::vector<float> dweight_huge(weight.size(), 0.0f);
    fp16::matmul_backward(nullptr, dweight_huge.data(), nullptr, huge.data(), inp.data(), nullptr, shape,
                          scratch.data(), scratch_elements, GradientWrite::overwrite);
    EXPECT_FALSE(std::all_of(dweight_huge.begin(), dweight_huge.end(), [](float v) { return std::isfinite(v); }));
  }
}

TEST(Fp16Kernels, ResultsAreIndependentOfTheThreadCount) {
  const MatmulCase m{300, 256, 384};
  const std::vector<float> inp = random_vector<float>(static_cast<std::size_t>(m.rows * m.in_features), 71);
  const std::vector<float> dout = random_vector<float>(static_cast<std::size_t>(m.rows * m.out_features), 72);
  const std::vector<float> bias = random_vector<float>(static_cast<std::size_t>(m.out_features), 73);
  const std::vector<std::uint16_t> weight =
      narrowed(random_vector<float>(static_cast<std::size_t>(m.in_features * m.out_features), 74));
  const std::vector<float> big = random_vector<float>(std::size_t{1} << 20, 75, 1e5);
  struct Results {
    std::vector<float> out, dinp, dweight, dbias, rounded;
    std::vector<std::uint16_t> narrowed;
  };
  const auto run = [&](WeightLayout layout, std::int64_t scratch_elements) {
    const MatmulShape shape{m.rows, m.in_features, m.out_features, layout};
    std::vector<float> scratch(static_cast<std::size_t>(scratch_elements));
    Results r{std::vector<float>(static_cast<std::size_t>(m.rows * m.out_features)),
              std::vector<float>(inp.size()),
              std::vector<float>(weight.size(), 0.0f),
              std::vector<float>(bias.size(), 0.0f),
              std::vector<float>(big.size()),
              std::vector<std::uint16_t>(big.size())};
    fp16::matmul_forward(r.out.data(), inp.data(), weight.data(), bias.data(), shape, scratch.data(), scratch_elements);
    fp16::matmul_backward(r.dinp.data(), r.dweight.data(), r.dbias.data(), dout.data(), inp.data(), weight.data(),
                          shape, scratch.data(), scratch_elements, GradientWrite::overwrite);
    fp16::round_to_f16(r.rounded.data(), big.data(), static_cast<std::int64_t>(big.size()));
    fp16::narrow(r.narrowed.data(), big.data(), static_cast<std::int64_t>(big.size()));
    return r;
  };
  const int saved_threads = omp_get_max_threads();
  for (const WeightLayout layout : {WeightLayout::in_out, WeightLayout::out_in})
    for (const std::int64_t scratch_elements : {std::int64_t{1} << 16, m.in_features * m.out_features}) {
      SCOPED_TRACE(std::string(layout_name(layout)) + " scratch " + std::to_string(scratch_elements));
      omp_set_num_threads(1);
      const Results one = run(layout, scratch_elements);
      omp_set_num_threads(2);
      const Results two = run(layout, scratch_elements);
      EXPECT_EQ(one.out, two.out);
      EXPECT_EQ(one.dinp, two.dinp);
      EXPECT_EQ(one.dweight, two.dweight);
      EXPECT_EQ(one.dbias, two.dbias);
      EXPECT_EQ(one.rounded, two.rounded);
      EXPECT_EQ(one.narrowed, two.narrowed);
    }
  omp_set_num_threads(saved_threads);
}

}  // namespace
}  // namespace strata
