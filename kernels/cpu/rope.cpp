#include "kernels/cpu/rope.hpp"

#include <vector>

namespace strata::cpu {

void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
          bool inverse) {
  const int half = head_dim / 2;
  // cos and sin per (position, pair), once per call: rows repeat positions across the batch.
  std::vector<float> cosines(static_cast<std::size_t>(seq_len) * half), sines(cosines.size());
  for (int i = 0; i < half; ++i) {
    const float inverse_frequency = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    for (int p = 0; p < seq_len; ++p) {
      const float angle = static_cast<float>(p) * inverse_frequency;
      cosines[static_cast<std::size_t>(p) * half + i] = std::cos(angle);
      sines[static_cast<std::size_t>(p) * half + i] = inverse ? -std::sin(angle) : std::sin(angle);
    }
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* c = cosines.data() + (r % seq_len) * half;
    const float* s = sines.data() + (r % seq_len) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + r * stride + static_cast<std::int64_t>(h) * head_dim;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace strata::cpu
