#pragma once
// Causal self-attention with grouped key/value heads. q is (N, n_head, D), k and v (N, n_kv_head,
// D), each with its own row stride (GPT-2's packed qkv is three views of one (N, 3C) buffer);
// query head h reads key/value head h / (n_head / n_kv_head). out is (N, n_head * D) contiguous.
// att (B, n_head, T, T) holds the softmax probabilities, kept for backward (entries above the
// diagonal are zero, and with a sliding window those more than window - 1 positions back). Backward adds into dq, dk,
// dv (laid out like q, k, v); scratch is (B, n_head, T, T).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "strata/ops.hpp"

namespace strata::cpu {

// The first key position query t attends to: t - window + 1 with a sliding window, else 0.
inline std::int64_t first_key(std::int64_t t, const AttentionShape& shape) {
  return shape.window > 0 ? std::max<std::int64_t>(0, t - shape.window + 1) : 0;
}

void attention_forward(float* out, float* att, const AttentionInputs& in, const AttentionShape& shape);
void attention_backward(const AttentionGrads& grads, float* scratch, const float* dout, const AttentionInputs& in,
                        const float* att, const AttentionShape& shape);

namespace reference {

// Views of q, k, v (or of their gradients) in any Real type, with row strides in elements.
template <typename Pointer>
struct QkvViews {
  Pointer q, k, v;
  std::int64_t q_stride, kv_stride;
};

// Materializes the T x T scores one row at a time, with plain loops.
template <typename Real>
void attention_forward(Real* out, Real* att, const QkvViews<const Real*>& in, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t group = NH / shape.n_kv_head;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(D));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < NH; ++h) {
        const Real* q = in.q + (b * T + t) * in.q_stride + h * D;
        Real* att_row = att + ((b * NH + h) * T + t) * T;
        const std::int64_t first = first_key(t, shape);
        Real max_value = -std::numeric_limits<Real>::infinity();
        for (std::int64_t t2 = first; t2 <= t; ++t2) {
          const Real* k = in.k + (b * T + t2) * in.kv_stride + (h / group) * D;
          Real dot = 0;
          for (std::int64_t i = 0; i < D; ++i) dot += q[i] * k[i];
          att_row[t2] = dot * scale;
          if (att_row[t2] > max_value) max_value = att_row[t2];
        }
        Real sum = 0;
        for (std::int64_t t2 = first; t2 <= t; ++t2) {
          att_row[t2] = std::exp(att_row[t2] - max_value);
          sum += att_row[t2];
        }
        for (std::int64_t t2 = 0; t2 < T; ++t2) att_row[t2] = t2 >= first && t2 <= t ? att_row[t2] / sum : Real(0);
        Real* y = out + (b * T + t) * NH * D + h * D;
        for (std::int64_t i = 0; i < D; ++i) y[i] = 0;
        for (std::int64_t t2 = first; t2 <= t; ++t2) {
          const Real* v = in.v + (b * T + t2) * in.kv_stride + (h / group) * D;
          for (std::int64_t i = 0; i < D; ++i) y[i] += att_row[t2] * v[i];
        }
      }
}

template <typename Real>
void attention_backward(const QkvViews<Real*>& grads, Real* scratch, const Real* dout, const QkvViews<const Real*>& in,
                        const Real* att, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, NH = shape.n_head, D = shape.head_dim;
  const std::int64_t group = NH / shape.n_kv_head;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(D));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < NH; ++h) {
        const std::int64_t kv_head = h / group;
        const Real* att_row = att + ((b * NH + h) * T + t) * T;
        Real* datt_row = scratch + ((b * NH + h) * T + t) * T;
        const Real* dy = dout + (b * T + t) * NH * D + h * D;
        const std::int64_t first = first_key(t, shape);
        // through out = att @ v
        for (std::int64_t t2 = first; t2 <= t; ++t2) {
          const Real* v = in.v + (b * T + t2) * in.kv_stride + kv_head * D;
          Real* dv = grads.v + (b * T + t2) * grads.kv_stride + kv_head * D;
          Real dot = 0;
          for (std::int64_t i = 0; i < D; ++i) {
            dot += v[i] * dy[i];
            dv[i] += att_row[t2] * dy[i];
          }
          datt_row[t2] = dot;
        }
        // through the softmax
        Real weighted = 0;
        for (std::int64_t t2 = first; t2 <= t; ++t2) weighted += att_row[t2] * datt_row[t2];
        const Real* q = in.q + (b * T + t) * in.q_stride + h * D;
        Real* dq = grads.q + (b * T + t) * grads.q_stride + h * D;
        for (std::int64_t t2 = first; t2 <= t; ++t2) {
          const Real dpreatt = att_row[t2] * (datt_row[t2] - weighted) * scale;
          const Real* k = in.k + (b * T + t2) * in.kv_stride + kv_head * D;
          Real* dk = grads.k + (b * T + t2) * grads.kv_stride + kv_head * D;
          for (std::int64_t i = 0; i < D; ++i) {
            dq[i] += dpreatt * k[i];
            dk[i] += dpreatt * q[i];
          }
        }
      }
}

}  // namespace reference
}  // namespace strata::cpu
