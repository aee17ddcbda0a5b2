#pragma once
#include <cstdint>
#include <string>

#include "strata/host_services.hpp"

namespace strata {

// The largest model.vocab: token files hold uint32 ids, and the LM head padded to a multiple of
// 64 rows (padded_vocab) must still fit in an int, so 2^31 - 64 rather than 2^31 - 1.
inline constexpr int kMaxVocab = 2147483647 - 63;

struct GPT2Config {
  int n_layer = 12;
  int n_head = 12;
  int d_model = 768;
  int vocab = 50257;
  int seq_len = 1024;  // the longest sequence; also the number of position embeddings

  // The LM head's rows are padded to a multiple of 64 for faster GEMMs; padded logits are masked
  // out of the loss and never stored in checkpoints.
  int padded_vocab() const { return (vocab + 63) / 64 * 64; }
  std::int64_t parameter_count() const;  // with the real vocab, as checkpoints store it
  ModelInfo info() const {
    return {"gpt2",      n_layer,          n_head,         n_head, d_model, vocab, seq_len, parameter_count(),
            4 * d_model, d_model / n_head, padded_vocab(), 0,      true};
  }

  // Empty when valid; otherwise what is wrong, naming the key.
  std::string validate() const;
};

}  // namespace strata
