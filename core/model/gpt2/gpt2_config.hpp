#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/adapter_targets.hpp"
#include "core/model/model_shape.hpp"
#include "strata/host_services.hpp"

namespace strata {

struct GPT2Config {
  int n_layer = 12;
  int n_head = 12;
  int d_model = 768;
  int vocab = 50257;
  int seq_len = 1024;  // the longest sequence; also the number of position embeddings

  // The LM head's rows are padded to a multiple of 64 for faster GEMMs; padded logits are masked
  // out of the loss and never stored in checkpoints.
  int padded_vocab() const { return (vocab + 63) / 64 * 64; }

  // Empty when valid; otherwise what is wrong, naming the key.
  std::string validate() const;
};

// GPT-2's fields of a ModelShape, and the ModelShape of a GPT-2 (its MLP 4 d_model wide, its head tied).
GPT2Config gpt2_config(const ModelShape& shape);
ModelShape gpt2_shape(const GPT2Config& config);
// The block matrices LoRA's `targets` name: qkv, attn_proj, fc and fc_proj.
std::vector<AdapterTarget> gpt2_adapter_targets(const GPT2Config& config);

}  // namespace strata
