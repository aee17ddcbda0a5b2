#include "kernels/cpu/embedding.hpp"

#include <algorithm>

namespace strata::cpu {

void embedding_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels) {
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const float* token_row = wte + static_cast<std::int64_t>(tokens[b * seq_len + t]) * channels;
      const float* position_row = wpe + t * channels;
      float* y = out + (b * seq_len + t) * channels;
#pragma omp simd
      for (std::int64_t c = 0; c < channels; ++c) y[c] = token_row[c] + position_row[c];
    }
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
        float* position_row = dwpe + t * channels;
#pragma omp simd
        for (std::int64_t c = block_start; c < block_end; ++c) {
          token_row[c] += d[c];
          position_row[c] += d[c];
        }
      }
  }
}

}  // namespace strata::cpu
