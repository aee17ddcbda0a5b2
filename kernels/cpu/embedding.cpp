#include "kernels/cpu/embedding.hpp"

#include <algorithm>

#include "strata/dtype.hpp"

namespace strata::cpu {

namespace {

float load(float value) {
  return value;
}
float load(std::uint16_t value) {
  return bf16_to_f32(value);
}

// A scaled token row (Gemma's sqrt(d_model)); the plain form does not multiply, so its bits are
// the table's.
template <bool kScaled>
inline float scaled(float value, float scale) {
  if constexpr (kScaled)
    return scale * value;
  else
    return value;
}

template <bool kScaled, typename Stored>
void embed(float* out, const std::int32_t* tokens, const Stored* wte, const Stored* wpe, std::int64_t batch,
           std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions, float scale) {
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const Stored* token_row = wte + static_cast<std::int64_t>(tokens[b * seq_len + t]) * channels;
      float* y = out + (b * seq_len + t) * channels;
      if (wpe == nullptr) {  // no position table: positions come from RoPE
#pragma omp simd
        for (std::int64_t c = 0; c < channels; ++c) y[c] = scaled<kScaled>(load(token_row[c]), scale);
        continue;
      }
      const std::int64_t position = positions != nullptr ? positions[b * seq_len + t] : t;
      const Stored* position_row = wpe + position * channels;
#pragma omp simd
      for (std::int64_t c = 0; c < channels; ++c)
        y[c] = scaled<kScaled>(load(token_row[c]), scale) + load(position_row[c]);
    }
}

template <typename Stored>
void embed(float* out, const std::int32_t* tokens, const Stored* wte, const Stored* wpe, std::int64_t batch,
           std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions, float scale) {
  if (scale == 1.0f)
    embed<false>(out, tokens, wte, wpe, batch, seq_len, channels, positions, scale);
  else
    embed<true>(out, tokens, wte, wpe, batch, seq_len, channels, positions, scale);
}

// Two positions may hold the same token, so rows of dwte collide: parallelize over column blocks
// and walk positions in order, which is race-free and independent of the thread count.
template <bool kScaled>
void embedding_gradients(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                         std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions, float scale) {
  constexpr std::int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (std::int64_t block_start = 0; block_start < channels; block_start += kBlock) {
    const std::int64_t block_end = std::min(block_start + kBlock, channels);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t t = 0; t < seq_len; ++t) {
        const float* d = dout + (b * seq_len + t) * channels;
        float* token_row = dwte + static_cast<std::int64_t>(tokens[b * seq_len + t]) * channels;
#pragma omp simd
        for (std::int64_t c = block_start; c < block_end; ++c) token_row[c] += scaled<kScaled>(d[c], scale);
        if (dwpe == nullptr) continue;
        const std::int64_t position = positions != nullptr ? positions[b * seq_len + t] : t;
        float* position_row = dwpe + position * channels;
#pragma omp simd
        for (std::int64_t c = block_start; c < block_end; ++c) position_row[c] += d[c];
      }
  }
}

}  // namespace

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions, float scale) {
  embed(out, tokens, wte, wpe, batch, seq_len, channels, positions, scale);
}

void embedding_forward_bf16(float* out, const std::int32_t* tokens, const std::uint16_t* wte, const std::uint16_t* wpe,
                            std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                            const std::int32_t* positions, float scale) {
  embed(out, tokens, wte, wpe, batch, seq_len, channels, positions, scale);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                        std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions, float scale) {
  if (scale == 1.0f)
    embedding_gradients<false>(dwte, dwpe, dout, tokens, batch, seq_len, channels, positions, scale);
  else
    embedding_gradients<true>(dwte, dwpe, dout, tokens, batch, seq_len, channels, positions, scale);
}

}  // namespace strata::cpu
