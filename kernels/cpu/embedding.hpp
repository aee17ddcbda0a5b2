#pragma once
// Token + position embedding. tokens are (B,T) int32; wte is (Vp,C); wpe is (maxT,C); out is (B,T,C):
// out = scale * wte[token] + wpe[position], the position t or positions[b, t] when given (packed
// documents). Backward accumulates scale * dout into dwte and dout into dwpe.
#include <cstdint>

namespace strata::cpu {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions = nullptr,
                       float scale = 1.0f);
// The same with both tables stored as bf16; the sum is taken in f32.
void embedding_forward_bf16(float* out, const std::int32_t* tokens, const std::uint16_t* wte, const std::uint16_t* wpe,
                            std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                            const std::int32_t* positions = nullptr, float scale = 1.0f);
void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                        std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions = nullptr,
                        float scale = 1.0f);

namespace reference {

template <typename Real>
void embedding_forward(Real* out, const std::int32_t* tokens, const Real* wte, const Real* wpe, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions = nullptr,
                       Real scale = Real(1)) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const std::int64_t token = tokens[b * seq_len + t];
      const std::int64_t p = positions != nullptr ? positions[b * seq_len + t] : t;
      for (std::int64_t c = 0; c < channels; ++c)
        out[(b * seq_len + t) * channels + c] =
            scale * wte[token * channels + c] + (wpe != nullptr ? wpe[p * channels + c] : Real(0));
    }
}

template <typename Real>
void embedding_backward(Real* dwte, Real* dwpe, const Real* dout, const std::int32_t* tokens, std::int64_t batch,
                        std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions = nullptr,
                        Real scale = Real(1)) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const std::int64_t token = tokens[b * seq_len + t];
      const std::int64_t p = positions != nullptr ? positions[b * seq_len + t] : t;
      for (std::int64_t c = 0; c < channels; ++c) {
        const Real d = dout[(b * seq_len + t) * channels + c];
        dwte[token * channels + c] += scale * d;
        if (dwpe != nullptr) dwpe[p * channels + c] += d;
      }
    }
}

}  // namespace reference
}  // namespace strata::cpu
