#pragma once
// Token + position embedding. tokens are (B,T) int32; wte is (Vp,C); wpe is (maxT,C); out is (B,T,C).
// Backward accumulates into dwte and dwpe.
#include <cstdint>

namespace strata::cpu {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels);
// The same with both tables stored as bf16; the sum is taken in f32.
void embedding_forward_bf16(float* out, const std::int32_t* tokens, const std::uint16_t* wte, const std::uint16_t* wpe,
                            std::int64_t batch, std::int64_t seq_len, std::int64_t channels);
void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                        std::int64_t seq_len, std::int64_t channels);

namespace reference {

template <typename Real>
void embedding_forward(Real* out, const std::int32_t* tokens, const Real* wte, const Real* wpe, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const std::int64_t token = tokens[b * seq_len + t];
      for (std::int64_t c = 0; c < channels; ++c)
        out[(b * seq_len + t) * channels + c] =
            wte[token * channels + c] + (wpe != nullptr ? wpe[t * channels + c] : Real(0));
    }
}

template <typename Real>
void embedding_backward(Real* dwte, Real* dwpe, const Real* dout, const std::int32_t* tokens, std::int64_t batch,
                        std::int64_t seq_len, std::int64_t channels) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const std::int64_t token = tokens[b * seq_len + t];
      for (std::int64_t c = 0; c < channels; ++c) {
        const Real d = dout[(b * seq_len + t) * channels + c];
        dwte[token * channels + c] += d;
        if (dwpe != nullptr) dwpe[t * channels + c] += d;
      }
    }
}

}  // namespace reference
}  // namespace strata::cpu
