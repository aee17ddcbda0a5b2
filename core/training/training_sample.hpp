#pragma once
// `train.sample_every = N`: every N steps, a short greedy continuation of a prompt in the log, to
// watch what the model learns, as llm.c prints one.
//
// The continuation is decoded by a model of its own: batch 1, f32 weights, on a CPU backend with its
// own attention op, built for the sample and dropped after it. The training model's weights are
// copied in as Model::merged_values gives them: the f32 master where there is one, else the stored
// form widened (bf16) or dequantized (int8), LoRA adapters folded in. The training model is only
// read, and the run's device memory is untouched but for int8 weights without a master (a frozen
// base), dequantized through a small workspace in the run's arena. Sampling costs host memory of 4
// bytes per parameter and a KV cache while it runs. The continuation is the one `strata generate
// --temperature 0` prints from the step's checkpoint with the same prompt, for f32 weights
// (tests/test_training_sample.cpp).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/data/dataset.hpp"
#include "core/manifest/manifest.hpp"
#include "core/model/model.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata {

struct TrainingSample {
  std::int64_t step = 0;
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> tokens;  // the continuation
  std::string prompt_text;           // as the run reads text; ids, space-separated, when it has no text
  std::string text;                  // what the continuation adds after it, the same way
};

// train.sample_prompt as ids, encoded as the run encodes text (bos first when the tokenizer adds
// one); empty for an empty prompt. Throws ManifestError for a prompt the run cannot encode (a token
// file and no tokenizer) or that leaves no room in the context: what `strata validate` checks.
std::vector<std::int32_t> sample_prompt_ids(const Manifest& manifest, const Tokenizer* tokenizer);

class TrainingSampler {
 public:
  // The prompt: train.sample_prompt encoded as the run encodes text; without one, the tokenizer's
  // bos (else its eos, as llm.c starts from <|endoftext|>), else the validation split's first 8
  // tokens. Throws ManifestError for a prompt the run cannot encode (a token file and no tokenizer).
  TrainingSampler(const Manifest& manifest, const Tokenizer* tokenizer, const Dataset& dataset);

  // The greedy continuation of the prompt by `model`'s weights as they are now. The caller has
  // completed the store's moves and synchronized the device.
  TrainingSample sample(Model& model, std::int64_t step) const;

 private:
  // The text `ids` add after `before`.
  std::string text_of(std::span<const std::int32_t> ids, std::span<const std::int32_t> before) const;

  const Manifest& manifest_;
  const Tokenizer* tokenizer_;
  bool text_is_bytes_;
  std::vector<std::int32_t> prompt_;
};

}  // namespace strata
