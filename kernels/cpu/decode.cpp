#include "kernels/cpu/decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace strata::cpu {

void rope_at(float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position, int n_heads, int head_dim,
             float theta) {
  const int half = head_dim / 2;
  std::vector<float> inverse_frequencies(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i)
    inverse_frequencies[static_cast<std::size_t>(i)] =
        1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto position = static_cast<float>(first_position + r);
    for (int i = 0; i < half; ++i) {
      const float angle = position * inverse_frequencies[static_cast<std::size_t>(i)];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + r * stride + static_cast<std::int64_t>(h) * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                      std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                      bool inverse) {
  const int half = head_dim / 2;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto position = static_cast<float>(first_position + r % seq_len);
    for (int i = 0; i < half; ++i) {
      const float angle = position * inverse_frequencies[i];
      const float c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + r * stride + static_cast<std::int64_t>(h) * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void attention_decode(const DecodeShape& shape, float* out, const AttentionInputs& in, float* k_cache, float* v_cache) {
  const std::int64_t D = shape.head_dim, NH = shape.n_head, KV = static_cast<std::int64_t>(shape.n_kv_head) * D;
  const std::int64_t group = NH / shape.n_kv_head;
  for (std::int64_t r = 0; r < shape.rows; ++r) {
    const std::int64_t position = shape.first_position + r;
    std::memcpy(k_cache + position * KV, in.k + r * in.kv_stride, static_cast<std::size_t>(KV) * sizeof(float));
    std::memcpy(v_cache + position * KV, in.v + r * in.kv_stride, static_cast<std::size_t>(KV) * sizeof(float));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const std::int64_t tasks = shape.rows * NH;
#pragma omp parallel
  {
    std::vector<float> scores(static_cast<std::size_t>(shape.first_position + shape.rows));
#pragma omp for schedule(static)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t r = task / NH, h = task % NH;
      const std::int64_t last = shape.first_position + r;  // attends to positions 0..last
      const float* q = in.q + r * in.q_stride + h * D;
      const std::int64_t kv_head = (h / group) * D;
      float max_score = -std::numeric_limits<float>::infinity();
      for (std::int64_t p = 0; p <= last; ++p) {
        const float* k = k_cache + p * KV + kv_head;
        float dot = 0.0f;
        for (std::int64_t i = 0; i < D; ++i) dot += q[i] * k[i];
        scores[static_cast<std::size_t>(p)] = dot * scale;
        max_score = std::max(max_score, dot * scale);
      }
      float sum = 0.0f;
      for (std::int64_t p = 0; p <= last; ++p) {
        scores[static_cast<std::size_t>(p)] = std::exp(scores[static_cast<std::size_t>(p)] - max_score);
        sum += scores[static_cast<std::size_t>(p)];
      }
      float* y = out + r * NH * D + h * D;
      std::fill(y, y + D, 0.0f);
      for (std::int64_t p = 0; p <= last; ++p) {
        const float weight = scores[static_cast<std::size_t>(p)] / sum;
        const float* v = v_cache + p * KV + kv_head;
        for (std::int64_t i = 0; i < D; ++i) y[i] += weight * v[i];
      }
    }
  }
}

}  // namespace strata::cpu
