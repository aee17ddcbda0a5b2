#pragma once
// Rotary position embedding in Hugging Face's rotate_half layout, in place on x (rows, n_heads,
// head_dim) whose rows are `stride` floats apart; row r is position r % seq_len. For i < d/2 (d =
// head_dim) the pair (x_i, x_{i+d/2}) of every head turns by the angle p * theta^(-2i/d):
//   x_i' = x_i cos - x_{i+d/2} sin,   x_{i+d/2}' = x_{i+d/2} cos + x_i sin.
// inverse = true turns by the opposite angle: the transpose, which is the backward pass. The
// frequencies and angles are computed in f32, as Hugging Face computes them.
#include <cmath>
#include <cstdint>
#include <vector>

namespace strata::cpu {

void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
          bool inverse);
// The same with the head_dim / 2 inverse frequencies given (a scaled RoPE, Ops::rope_frequencies)
// and row r at position first_position + r % seq_len (Ops::rope_at: seq_len = rows). rope() is
// this with theta's frequencies and first_position 0.
void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse);
// The same with each row's position given ((rows) positions: packed documents restart at 0).
void rope_positions(float* x, std::int64_t rows, std::int64_t stride, const std::int32_t* positions, int n_heads,
                    int head_dim, const float* inverse_frequencies, bool inverse);
// theta^(-2i/head_dim) for i < head_dim / 2, in f32, as Hugging Face computes them.
std::vector<float> rope_inverse_frequencies(float theta, int head_dim);

namespace reference {

template <typename Real>
void rope(Real* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, double theta,
          bool inverse) {
  const int half = head_dim / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const Real position = static_cast<Real>(r % seq_len);
    for (int h = 0; h < n_heads; ++h) {
      Real* v = x + r * stride + static_cast<std::int64_t>(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const Real angle =
            position / std::pow(static_cast<Real>(theta), static_cast<Real>(2 * i) / static_cast<Real>(head_dim));
        const Real c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
        const Real a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

}  // namespace reference
}  // namespace strata::cpu
