#pragma once
// Causal multi-head self-attention. qkv is (B,T,3C) = [q | k | v] on the last axis, C = NH*hs;
// out is (B,T,C). att (B,NH,T,T) holds the softmax probabilities, kept for backward (entries above
// the diagonal are zero). Backward accumulates into dqkv; scratch is (B,NH,T,T).
#include <cmath>
#include <cstdint>
#include <limits>

#include "strata/kernel.hpp"

namespace strata::cpu {

void attention_forward(float* out, float* att, const float* qkv, const AttentionShape& shape);
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att,
                        const AttentionShape& shape);

namespace reference {

// Materializes the T x T scores one row at a time, with plain loops.
template <typename Real>
void attention_forward(Real* out, Real* att, const Real* qkv, const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, C = shape.d_model, NH = shape.n_head;
  const std::int64_t hs = C / NH;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < NH; ++h) {
        const Real* q = qkv + (b * T + t) * 3 * C + h * hs;
        Real* att_row = att + ((b * NH + h) * T + t) * T;
        Real max_value = -std::numeric_limits<Real>::infinity();
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const Real* k = qkv + (b * T + t2) * 3 * C + C + h * hs;
          Real dot = 0;
          for (std::int64_t i = 0; i < hs; ++i) dot += q[i] * k[i];
          att_row[t2] = dot * scale;
          if (att_row[t2] > max_value) max_value = att_row[t2];
        }
        Real sum = 0;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          att_row[t2] = std::exp(att_row[t2] - max_value);
          sum += att_row[t2];
        }
        for (std::int64_t t2 = 0; t2 < T; ++t2) att_row[t2] = t2 <= t ? att_row[t2] / sum : Real(0);
        Real* y = out + (b * T + t) * C + h * hs;
        for (std::int64_t i = 0; i < hs; ++i) y[i] = 0;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const Real* v = qkv + (b * T + t2) * 3 * C + 2 * C + h * hs;
          for (std::int64_t i = 0; i < hs; ++i) y[i] += att_row[t2] * v[i];
        }
      }
}

template <typename Real>
void attention_backward(Real* dqkv, Real* scratch, const Real* dout, const Real* qkv, const Real* att,
                        const AttentionShape& shape) {
  const std::int64_t B = shape.batch, T = shape.seq_len, C = shape.d_model, NH = shape.n_head;
  const std::int64_t hs = C / NH;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t h = 0; h < NH; ++h) {
        const Real* att_row = att + ((b * NH + h) * T + t) * T;
        Real* datt_row = scratch + ((b * NH + h) * T + t) * T;
        const Real* dy = dout + (b * T + t) * C + h * hs;
        // through out = att @ v
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const Real* v = qkv + (b * T + t2) * 3 * C + 2 * C + h * hs;
          Real* dv = dqkv + (b * T + t2) * 3 * C + 2 * C + h * hs;
          Real dot = 0;
          for (std::int64_t i = 0; i < hs; ++i) {
            dot += v[i] * dy[i];
            dv[i] += att_row[t2] * dy[i];
          }
          datt_row[t2] = dot;
        }
        // through the softmax
        Real weighted = 0;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) weighted += att_row[t2] * datt_row[t2];
        const Real* q = qkv + (b * T + t) * 3 * C + h * hs;
        Real* dq = dqkv + (b * T + t) * 3 * C + h * hs;
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const Real dpreatt = att_row[t2] * (datt_row[t2] - weighted) * scale;
          const Real* k = qkv + (b * T + t2) * 3 * C + C + h * hs;
          Real* dk = dqkv + (b * T + t2) * 3 * C + C + h * hs;
          for (std::int64_t i = 0; i < hs; ++i) {
            dq[i] += dpreatt * k[i];
            dk[i] += dpreatt * q[i];
          }
        }
      }
}

}  // namespace reference
}  // namespace strata::cpu
