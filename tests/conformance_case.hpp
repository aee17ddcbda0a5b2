#pragma once
// The backend conformance table's rows (tests/test_backend_ops.cpp): each case runs an op on a
// backend's memory and returns its worst error against a reference; the table prints it beside the
// case's bound. Cases live in several files, one concern each, and the table gathers them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "strata/ops.hpp"

namespace strata::test::conformance {

using Floats = std::vector<float>;

inline Floats random_floats(std::size_t count, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-scale, scale);
  Floats values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

inline std::vector<double> widen_to_double(const Floats& values) {
  return {values.begin(), values.end()};
}

// max |a - b| / max(1, max |b|): relative to the result's scale, absolute near zero.
inline double error_of(const Floats& actual, const std::vector<double>& expected) {
  double worst = 0.0, scale = 1.0;
  for (double value : expected) scale = std::max(scale, std::abs(value));
  for (std::size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(actual[i]) - expected[i]));
  return worst / scale;
}
inline double error_of(const Floats& actual, const Floats& expected) {
  return error_of(actual, widen_to_double(expected));
}

inline std::vector<std::uint16_t> to_bf16(const Floats& values) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = f32_to_bf16(values[i]);
  return out;
}
inline Floats from_bf16(const std::vector<std::uint16_t>& values) {
  Floats out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = bf16_to_f32(values[i]);
  return out;
}

struct Case {
  std::string op;
  std::string shape;
  std::string dtype;
  Op kind;
  double bound;
  std::function<double(Backend&)> run;  // the worst error over the case's outputs
};

// Gemm (both transposes, alpha and beta, f32 and bf16 operands), qr and eigh
// (tests/conformance_linear_algebra.cpp).
std::vector<Case> linear_algebra_cases();
// The ops' options that families and fine-tuning use: GeGLU, RMSNorm's (1 + w) gain, embedding
// positions and scale, RoPE at given positions, targets without a loss, decoding within a window
// (tests/conformance_model_variants.cpp).
std::vector<Case> model_variant_cases();

}  // namespace strata::test::conformance
