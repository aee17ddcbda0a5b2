#include "kernels/cpu/decode.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace strata::cpu {

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
      const std::int64_t last = shape.first_position + r;  // attends to positions first..last
      const std::int64_t first = shape.window > 0 ? std::max<std::int64_t>(0, last - shape.window + 1) : 0;
      const float* q = in.q + r * in.q_stride + h * D;
      const std::int64_t kv_head = (h / group) * D;
      float max_score = -std::numeric_limits<float>::infinity();
      for (std::int64_t p = first; p <= last; ++p) {
        const float* k = k_cache + p * KV + kv_head;
        float dot = 0.0f;
        for (std::int64_t i = 0; i < D; ++i) dot += q[i] * k[i];
        scores[static_cast<std::size_t>(p)] = dot * scale;
        max_score = std::max(max_score, dot * scale);
      }
      float sum = 0.0f;
      for (std::int64_t p = first; p <= last; ++p) {
        scores[static_cast<std::size_t>(p)] = std::exp(scores[static_cast<std::size_t>(p)] - max_score);
        sum += scores[static_cast<std::size_t>(p)];
      }
      float* y = out + r * NH * D + h * D;
      std::fill(y, y + D, 0.0f);
      for (std::int64_t p = first; p <= last; ++p) {
        const float weight = scores[static_cast<std::size_t>(p)] / sum;
        const float* v = v_cache + p * KV + kv_head;
        for (std::int64_t i = 0; i < D; ++i) y[i] += weight * v[i];
      }
    }
  }
}

}  // namespace strata::cpu
