#include "kernels/cpu/rope.hpp"

#include <algorithm>
#include <vector>

namespace strata::cpu {

std::vector<float> rope_inverse_frequencies(float theta, int head_dim) {
  std::vector<float> frequencies(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < frequencies.size(); ++i)
    frequencies[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  return frequencies;
}

void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
          bool inverse) {
  rope_frequencies(x, rows, stride, seq_len, 0, n_heads, head_dim, rope_inverse_frequencies(theta, head_dim).data(),
                   inverse);
}

namespace {

// Turns the pairs of every head of one row by the angles whose cosines and sines are c and s.
inline void turn_row(float* row, const float* c, const float* s, int n_heads, int head_dim) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = row + static_cast<std::int64_t>(h) * head_dim;
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * c[i] - b * s[i];
      v[i + half] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace

void rope_positions(float* x, std::int64_t rows, std::int64_t stride, const std::int32_t* positions, int n_heads,
                    int head_dim, const float* inverse_frequencies, bool inverse) {
  const int half = head_dim / 2;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> c(static_cast<std::size_t>(half)), s(static_cast<std::size_t>(half));
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[r]) * inverse_frequencies[i];
      c[static_cast<std::size_t>(i)] = std::cos(angle);
      s[static_cast<std::size_t>(i)] = inverse ? -std::sin(angle) : std::sin(angle);
    }
    turn_row(x + r * stride, c.data(), s.data(), n_heads, head_dim);
  }
}

void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse) {
  const int half = head_dim / 2;
  const std::int64_t positions = std::min(seq_len, rows);
  // cos and sin per (position, pair), once per call: rows repeat positions across the batch.
  std::vector<float> cosines(static_cast<std::size_t>(positions) * half), sines(cosines.size());
  for (std::int64_t p = 0; p < positions; ++p)
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(first_position + p) * inverse_frequencies[i];
      cosines[static_cast<std::size_t>(p) * half + i] = std::cos(angle);
      sines[static_cast<std::size_t>(p) * half + i] = inverse ? -std::sin(angle) : std::sin(angle);
    }
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r)
    turn_row(x + r * stride, cosines.data() + (r % seq_len) * half, sines.data() + (r % seq_len) * half, n_heads,
             head_dim);
}

}  // namespace strata::cpu
