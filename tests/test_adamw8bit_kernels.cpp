// The 8-bit AdamW plugin's CPU kernels: the dynamic quantization maps and nearest-code search
// against a linear scan, the block-wise round trip within half a map gap, a 200-step trajectory
// against f32 AdamW, bitwise independence of the thread count, and the first step from zeroed
// state against f32 AdamW from zero moments.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "plugins/adamw/cpu/adamw_cpu.hpp"
#include "plugins/adamw8bit/cpu/adamw8bit_cpu.hpp"
#include "plugins/adamw8bit/cpu/dynamic_quantization.hpp"

namespace strata::adamw8bit {
namespace {

std::vector<float> normal_vector(std::size_t count, std::uint32_t seed, float stddev) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> distribution(0.0f, stddev);
  std::vector<float> values(count);
  for (auto& value : values) value = distribution(generator);
  return values;
}

// The nearest map value by brute force; ties to the value nearer zero.
int nearest_by_scan(std::span<const float, 256> map, float x) {
  int best = 0;
  double best_distance = std::abs(static_cast<double>(x) - map[0]);
  for (int i = 1; i < 256; ++i) {
    const double distance = std::abs(static_cast<double>(x) - map[i]);
    if (distance < best_distance || (distance == best_distance && std::abs(map[i]) < std::abs(map[best]))) {
      best = i;
      best_distance = distance;
    }
  }
  return best;
}

// The most a value whose normalized form is x may move in a round trip: half the gap between the
// map values around x, plus the roundings of value / absmax and of code * absmax.
double allowed_error(std::span<const float, 256> map, double x, float absmax) {
  const auto upper = std::upper_bound(map.begin(), map.end(), x);
  const double half_gap = (upper == map.begin() || upper == map.end()) ? 0.0 : (*upper - *(upper - 1)) / 2.0;
  return (half_gap + std::ldexp(1.0, -23)) * absmax;
}

// Worst |dequantized - exact| / allowed_error over all elements (<= 1 passes).
double worst_error_ratio(const std::vector<float>& exact, const std::vector<float>& dequantized,
                         const std::vector<float>& absmax, std::int64_t block_size, MapKind kind) {
  const auto map = quantization_map(kind);
  double worst = 0.0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const float scale = absmax[i / block_size];
    const double error = std::abs(static_cast<double>(dequantized[i]) - exact[i]);
    if (scale == 0.0f) {
      worst = std::max(worst, error == 0.0 ? 0.0 : 2.0);
      continue;
    }
    worst = std::max(worst, error / allowed_error(map, static_cast<double>(exact[i]) / scale, scale));
  }
  return worst;
}

bool same_bytes(const void* a, const void* b, std::size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

TEST(AdamW8bitKernels, MapsAreSortedAndQuantizeValuePicksTheNearest) {
  for (const MapKind kind : {MapKind::signed_dynamic, MapKind::unsigned_dynamic}) {
    const bool is_signed = kind == MapKind::signed_dynamic;
    const auto map = quantization_map(kind);
    for (int i = 1; i < 256; ++i) ASSERT_LT(map[i - 1], map[i]) << "code " << i;
    EXPECT_EQ(map.front(), is_signed ? -1.0f : 0.0f);
    EXPECT_EQ(map.back(), 1.0f);
    const int zero_code = is_signed ? 128 : 0;
    EXPECT_EQ(map[zero_code], 0.0f);
    // The top decade's linear step (64 or 128 levels) and the smallest magnitudes.
    EXPECT_EQ(map[254], static_cast<float>(0.1 + 0.9 * (is_signed ? 63.0 / 64.0 : 127.0 / 128.0)));
    EXPECT_EQ(map[zero_code + 1], is_signed ? 1e-6f : 1e-7f);
    if (is_signed) {
      EXPECT_EQ(map[0], -map[255]);
      EXPECT_EQ(map[zero_code - 1], -1e-7f);
    }
    EXPECT_EQ(quantize_value(map, 0.0f), zero_code);

    // Random values (uniform, and log-uniform magnitudes to reach the small decades), every map
    // value, every exact midpoint (a tie where it is a float) and the floats beside it; quantize_block
    // (the fast search) must agree with quantize_value and the scan on each.
    std::mt19937 generator(is_signed ? 11 : 12);
    std::uniform_real_distribution<float> uniform(is_signed ? -1.0f : 0.0f, 1.0f);
    std::uniform_real_distribution<float> exponent(-9.0f, 0.0f);
    std::vector<float> values;
    for (int i = 0; i < 100000; ++i) values.push_back(uniform(generator));
    for (int i = 0; i < 100000; ++i) {
      const float magnitude = std::pow(10.0f, exponent(generator));
      values.push_back(is_signed && i % 2 == 1 ? -magnitude : magnitude);
    }
    int ties = 0;
    for (int i = 0; i < 256; ++i) {
      values.push_back(map[i]);
      if (i == 255) break;
      const float midpoint = static_cast<float>((static_cast<double>(map[i]) + map[i + 1]) / 2.0);
      ties += static_cast<double>(midpoint) == (static_cast<double>(map[i]) + map[i + 1]) / 2.0;
      for (const float x : {std::nextafter(midpoint, -2.0f), midpoint, std::nextafter(midpoint, 2.0f)}) {
        values.push_back(x);
      }
    }
    EXPECT_GT(ties, 100);  // exact ties are exercised, not only near ones
    // Every float down to 2^-30 whose low 16 bits are zero, and the float before it: the edges of
    // the fast search's buckets.
    for (std::uint32_t bits = 97u << 23; bits <= 0x3f800000u; bits += 1u << 16) {
      for (const float magnitude : {std::bit_cast<float>(bits), std::bit_cast<float>(bits - 1)}) {
        values.push_back(magnitude);
        if (is_signed) values.push_back(-magnitude);
      }
    }

    std::vector<std::uint8_t> codes(values.size());
    quantize_block(codes.data(), values.data(), static_cast<std::int64_t>(values.size()), 1.0f, kind);
    int mismatches = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const int expected = nearest_by_scan(map, values[i]);
      const int found = quantize_value(map, values[i]);
      if (found != expected || codes[i] != expected) {
        if (++mismatches <= 5) {
          ADD_FAILURE() << "x = " << values[i] << ": scan " << expected << ", quantize_value " << found
                        << ", quantize_block " << int{codes[i]};
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << (is_signed ? "signed" : "unsigned") << " map, " << values.size() << " values";
  }
}

TEST(AdamW8bitKernels, BlockwiseRoundTripIsWithinHalfAMapGap) {
  constexpr std::int64_t kBlock = 2048;
  constexpr std::int64_t kCount = 5 * kBlock + 777;  // a short last block
  EXPECT_EQ(block_count(kCount, kBlock), 6);
  EXPECT_EQ(block_count(5 * kBlock, kBlock), 5);
  for (const MapKind kind : {MapKind::signed_dynamic, MapKind::unsigned_dynamic}) {
    const bool is_signed = kind == MapKind::signed_dynamic;
    std::vector<float> values = normal_vector(kCount, is_signed ? 21 : 22, 0.01f);
    if (!is_signed) {
      for (auto& value : values) value = value * value;  // second moments: squares
    }
    std::fill(values.begin() + 2 * kBlock, values.begin() + 3 * kBlock, 0.0f);  // one zero block
    std::vector<std::uint8_t> codes(kCount);
    std::vector<float> absmax(block_count(kCount, kBlock));
    quantize_blockwise(codes.data(), absmax.data(), values.data(), kCount, kBlock, kind);

    for (std::int64_t b = 0; b < block_count(kCount, kBlock); ++b) {
      float expected = 0.0f;
      for (std::int64_t i = b * kBlock; i < std::min(kCount, (b + 1) * kBlock); ++i) {
        expected = std::max(expected, std::abs(values[i]));
      }
      EXPECT_EQ(absmax[b], expected) << "block " << b;
    }
    EXPECT_EQ(absmax[2], 0.0f);
    const std::uint8_t zero_code = quantize_value(quantization_map(kind), 0.0f);
    EXPECT_TRUE(std::all_of(codes.begin() + 2 * kBlock, codes.begin() + 3 * kBlock,
                            [&](std::uint8_t code) { return code == zero_code; }));

    std::vector<float> round_trip(kCount, 123.0f);
    dequantize_blockwise(round_trip.data(), codes.data(), absmax.data(), kCount, kBlock, kind);
    const double ratio = worst_error_ratio(values, round_trip, absmax, kBlock, kind);
    std::printf("%s map: worst round-trip error / (half map gap * absmax) = %.4f\n", is_signed ? "signed" : "unsigned",
                ratio);
    EXPECT_LE(ratio, 1.0);
    const std::vector<float> zeros(kBlock, 0.0f);
    EXPECT_TRUE(same_bytes(round_trip.data() + 2 * kBlock, zeros.data(), kBlock * sizeof(float)))
        << "a zero block decodes as +0.0";
  }
}

double squared_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += (static_cast<double>(a[i]) - b[i]) * (a[i] - b[i]);
  return sum;
}

// Minimizes ||param - target||^2 / 2 from noisy gradients param - target + noise, with f32 AdamW
// and with the 8-bit update side by side (each from its own parameters, the same noise), and
// compares them after every step.
TEST(AdamW8bitKernels, TrajectoryFollowsF32AdamW) {
  constexpr std::int64_t kCount = 10000;  // not a multiple of either block size
  constexpr int kSteps = 200;
  const AdamWHyper base{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
  const std::vector<float> target = normal_vector(kCount, 31, 1.0f);
  const std::vector<float> start = normal_vector(kCount, 32, 1.0f);
  const std::vector<float> zeros(kCount, 0.0f);
  const double initial_loss = squared_distance(start, target);
  for (const std::int64_t block : {std::int64_t{256}, std::int64_t{2048}}) {
    std::vector<float> p32 = start, m(kCount, 0.0f), v(kCount, 0.0f), g32(kCount);
    std::vector<float> p8 = start, g8(kCount);
    std::vector<std::uint8_t> m_codes(kCount, 0), v_codes(kCount, 0);
    std::vector<float> m_absmax(block_count(kCount, block), 0.0f), v_absmax(block_count(kCount, block), 0.0f);
    double worst_relative = 0.0;    // ||p8 - p32|| / ||p32||
    double worst_loss_ratio = 0.0;  // |loss_8bit / loss_f32 - 1|
    for (int step = 1; step <= kSteps; ++step) {
      const std::vector<float> noise = normal_vector(kCount, 1000 + step, 0.1f);
      for (std::int64_t i = 0; i < kCount; ++i) {
        g32[i] = p32[i] - target[i] + noise[i];
        g8[i] = p8[i] - target[i] + noise[i];
      }
      AdamWHyper hyper = base;
      hyper.step = step;
      adamw::cpu::update(p32.data(), g32.data(), m.data(), v.data(), kCount, hyper);
      adamw8bit_update(p8.data(), g8.data(), {m_codes.data(), m_absmax.data()}, {v_codes.data(), v_absmax.data()},
                       kCount, block, hyper);
      worst_relative = std::max(worst_relative, std::sqrt(squared_distance(p8, p32) / squared_distance(p32, zeros)));
      worst_loss_ratio =
          std::max(worst_loss_ratio, std::abs(squared_distance(p8, target) / squared_distance(p32, target) - 1.0));
    }
    const double loss32 = squared_distance(p32, target);
    const double loss8 = squared_distance(p8, target);
    std::printf(
        "block %lld: loss %.1f -> f32 %.2f, 8-bit %.2f; worst over steps: params relative difference "
        "%.2e, |loss ratio - 1| %.2e\n",
        static_cast<long long>(block), initial_loss, loss32, loss8, worst_relative, worst_loss_ratio);
    // Measured: params 4.95e-2 (block 256) and 4.65e-2 (block 2048), loss 1.03e-1 and 1.05e-1;
    // the final losses are 10.6% (f32) and 11.7% (8-bit) of the initial one. The gap comes from v:
    // rounding only v after each f32 step reproduces it, rounding only m leaves the loss within 4%.
    EXPECT_LT(worst_relative, 0.1);
    EXPECT_LT(worst_loss_ratio, 0.2);
    EXPECT_LT(loss8, 0.15 * initial_loss);
  }
}

// Parameters and 8-bit state that start zeroed, stepped by adamw8bit_update.
struct QuantizedRun {
  QuantizedRun(std::int64_t count, std::int64_t block)
      : block(block),
        param(normal_vector(count, 41, 1.0f)),
        m_codes(count, 0),
        v_codes(count, 0),
        m_absmax(block_count(count, block), 0.0f),
        v_absmax(block_count(count, block), 0.0f) {}
  void step(const std::vector<float>& grad, const AdamWHyper& hyper) {
    adamw8bit_update(param.data(), grad.data(), {m_codes.data(), m_absmax.data()}, {v_codes.data(), v_absmax.data()},
                     static_cast<std::int64_t>(param.size()), block, hyper);
  }
  bool operator==(const QuantizedRun& other) const {
    auto same = [](const auto& a, const auto& b) {
      return a.size() == b.size() && same_bytes(a.data(), b.data(), a.size() * sizeof(a[0]));
    };
    return same(param, other.param) && same(m_codes, other.m_codes) && same(v_codes, other.v_codes) &&
           same(m_absmax, other.m_absmax) && same(v_absmax, other.v_absmax);
  }
  std::int64_t block;
  std::vector<float> param;
  std::vector<std::uint8_t> m_codes, v_codes;
  std::vector<float> m_absmax, v_absmax;
};

TEST(AdamW8bitKernels, BitwiseIdenticalForAnyThreadCount) {
  constexpr std::int64_t kCount = 3 * 4096 + 1000;
  constexpr int kSteps = 5;
  const AdamWHyper base{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
  std::vector<std::vector<float>> grads;
  for (int s = 0; s < kSteps; ++s) grads.push_back(normal_vector(kCount, 50 + s, 1.0f));
  const int saved_threads = omp_get_max_threads();
  for (const std::int64_t block : {std::int64_t{256}, std::int64_t{4096}}) {
    // Two runs with 1 thread step for step, then 2 and 3 threads against them after every step.
    std::vector<QuantizedRun> runs(4, QuantizedRun(kCount, block));
    const int threads[] = {1, 1, 2, 3};
    for (int s = 0; s < kSteps; ++s) {
      AdamWHyper hyper = base;
      hyper.step = s + 1;
      for (std::size_t r = 0; r < runs.size(); ++r) {
        omp_set_num_threads(threads[r]);
        runs[r].step(grads[s], hyper);
      }
      for (std::size_t r = 1; r < runs.size(); ++r) {
        EXPECT_TRUE(runs[r] == runs[0]) << "block " << block << ", step " << s + 1 << ", " << threads[r]
                                        << " threads against 1";
      }
    }
    EXPECT_FALSE(runs[0] == QuantizedRun(kCount, block));  // the runs moved
  }
  omp_set_num_threads(saved_threads);
}

// The first step from zeroed codes and absmax is f32 AdamW's first step from zero moments: the
// same parameters, and m = (1 - b1) g, v = (1 - b2) g^2 within their quantization error.
TEST(AdamW8bitKernels, ZeroedStateIsZeroMoments) {
  constexpr std::int64_t kCount = 5000;
  constexpr std::int64_t kBlock = 1024;
  const AdamWHyper hyper{
      .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 1, .grad_scale = 0.5f};
  std::vector<float> grad = normal_vector(kCount, 61, 1e-3f);
  std::fill(grad.begin() + kBlock, grad.begin() + 2 * kBlock, 0.0f);  // one block's moments stay zero

  QuantizedRun q8(kCount, kBlock);
  q8.step(grad, hyper);
  std::vector<float> p32 = normal_vector(kCount, 41, 1.0f), m(kCount, 0.0f), v(kCount, 0.0f);
  adamw::cpu::update(p32.data(), grad.data(), m.data(), v.data(), kCount, hyper);

  // The parameters move with the step's f32 moments, as in f32 AdamW: bitwise equal where both
  // kernels round alike (the portable build; -march=native lets the adamw plugin's kernel contract to FMA).
  double worst = 0.0;
  for (std::int64_t i = 0; i < kCount; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(q8.param[i]) - p32[i]) / (std::abs(p32[i]) + hyper.lr));
  }
  EXPECT_LT(worst, 1e-6);
#ifndef STRATA_NO_CPU_CLONES
  EXPECT_TRUE(same_bytes(q8.param.data(), p32.data(), kCount * sizeof(float)));
#endif

  std::vector<float> m8(kCount), v8(kCount);
  dequantize_blockwise(m8.data(), q8.m_codes.data(), q8.m_absmax.data(), kCount, kBlock, MapKind::signed_dynamic);
  dequantize_blockwise(v8.data(), q8.v_codes.data(), q8.v_absmax.data(), kCount, kBlock, MapKind::unsigned_dynamic);
  for (std::int64_t b = 0; b < block_count(kCount, kBlock); ++b) {
    float m_max = 0.0f, v_max = 0.0f;
    for (std::int64_t i = b * kBlock; i < std::min(kCount, (b + 1) * kBlock); ++i) {
      m_max = std::max(m_max, std::abs(m[i]));
      v_max = std::max(v_max, v[i]);
    }
    EXPECT_EQ(q8.m_absmax[b], m_max) << "block " << b;
    EXPECT_EQ(q8.v_absmax[b], v_max) << "block " << b;
  }
  EXPECT_EQ(q8.m_absmax[1], 0.0f);
  const double m_ratio = worst_error_ratio(m, m8, q8.m_absmax, kBlock, MapKind::signed_dynamic);
  const double v_ratio = worst_error_ratio(v, v8, q8.v_absmax, kBlock, MapKind::unsigned_dynamic);
  std::printf("first step: worst error / (half map gap * absmax): m %.4f, v %.4f\n", m_ratio, v_ratio);
  EXPECT_LE(m_ratio, 1.0);
  EXPECT_LE(v_ratio, 1.0);
}

}  // namespace
}  // namespace strata::adamw8bit
