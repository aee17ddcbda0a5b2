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

template <typename Stored>
void embed(float* out, const std::int32_t* tokens, const Stored* wte, const Stored* wpe, std::int64_t batch,
           std::int64_t seq_len, std::int64_t channels) {
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const Stored* token_row = wte + static_cast<std::int64_t>(tokens[b * seq_len + t]) * channels;
      float* y = out + (b * seq_len + t) * channels;
      if (wpe == nullptr) {  // no position table: positions come from RoPE
#pragma omp simd
        for (std::int64_t c = 0; c < channels; ++c) y[c] = load(token_row[c]);
        continue;
      }
      const Stored* position_row = wpe + t * channels;
#pragma omp simd
      for (std::int64_t c = 0; c < channels; ++c) y[c] = load(token_row[c]) + load(position_row[c]);
    }
}

}  // namespace

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels) {
  embed(out, tokens, wte, wpe, batch, seq_len, channels);
}

void embedding_forward_bf16(float* out, const std::int32_t* tokens, const std::uint16_t* wte, const std::uint16_t* wpe,
                            std::int64_t batch, std::int64_t seq_len, std::int64_t channels) {
  embed(out, tokens, wte, wpe, batch, seq_len, channels);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                        std::int64_t seq_len, std::int64_t channels) {
  // Two positions may hold the same token, so rows of dwte collide: parallelize over column blocks
  // and walk positions in order, which is race-free and independent of the thread count.
  constexpr std::int64_t kBlock = 64;
#pragma omp parallel for schedule(static)
  for (std::int64_t block_start = 0; block_start < channels; block_start += kBlock) {
    const std::int64_t block_end = std::min(block_start + kBlock, channels);
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t t = 0; t < seq_len; ++t) {
        const float* d = dout + (b * seq_len + t) * channels;
        float* token_row = dwte + static_cast<std::int64_t>(tokens[b * seq_len + t]) * channels;
#pragma omp simd
        for (std::int64_t c = block_start; c < block_end; ++c) token_row[c] += d[c];
        if (dwpe == nullptr) continue;
        float* position_row = dwpe + t * channels;
#pragma omp simd
        for (std::int64_t c = block_start; c < block_end; ++c) position_row[c] += d[c];
      }
  }
}

}  // namespace strata::cpu
