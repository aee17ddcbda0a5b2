#pragma once
// Helpers shared by the kernel tests: random inputs, central finite differences of a reference
// forward in double, and the fast-against-reference comparison (printed, then asserted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace strata::cpu::test {

template <typename Real>
std::vector<Real> random_vector(std::size_t count, std::uint32_t seed, double scale = 1.0) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> distribution(-scale, scale);
  std::vector<Real> values(count);
  for (auto& value : values) value = static_cast<Real>(distribution(generator));
  return values;
}

// Checks d(objective)/d(input) given as `analytic` against central differences of `objective`,
// which maps the (perturbed) input to a scalar.
inline double max_relative_error(std::vector<double>& input, const std::vector<double>& analytic,
                                 const std::function<double()>& objective) {
  const double h = 1e-6;
  double worst = 0.0;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const double saved = input[i];
    input[i] = saved + h;
    const double plus = objective();
    input[i] = saved - h;
    const double minus = objective();
    input[i] = saved;
    const double numeric = (plus - minus) / (2 * h);
    const double error = std::abs(numeric - analytic[i]) / std::max(1.0, std::abs(numeric) + std::abs(analytic[i]));
    worst = std::max(worst, error);
  }
  return worst;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

inline constexpr double kGradientBound = 1e-6;

inline double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

inline void expect_close(const char* what, const std::vector<float>& fast, const std::vector<float>& ref,
                         double bound) {
  const double difference = max_abs_difference(fast, ref);
  std::printf("%-28s fast vs reference max |diff| %.3g (bound %.1g)\n", what, difference, bound);
  EXPECT_LT(difference, bound) << what;
}

}  // namespace strata::cpu::test
