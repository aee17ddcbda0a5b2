#pragma once
// Text continuation with a KV cache: one prefill of the prompt (every prompt position through the
// blocks at once, their keys and values cached), then one position per new token (Model::decode).
// Generation stops after max_new_tokens, at the stop token (eos), or when the sequence fills the
// model's context (seq_len positions), and says which.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/generate/sampler.hpp"
#include "core/model/kv_cache.hpp"
#include "core/model/model.hpp"

namespace strata {

struct GenerationOptions {
  SamplingOptions sampling;
  int max_new_tokens = 64;
  std::optional<std::int32_t> stop_token;  // generated, it ends the continuation (and is kept)
  int vocabulary = 0;  // > 0: sample among the first `vocabulary` ids only (what a tokenizer can write)
};

enum class StopReason { max_new_tokens, stop_token, context };

struct GenerationResult {
  std::vector<std::int32_t> tokens;  // the new ones
  StopReason stopped = StopReason::max_new_tokens;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // every step after the prefill
  std::uint64_t kv_cache_bytes = 0;
};

// `prompt` (1 to seq_len tokens) continues; `on_token` sees each new token as it is chosen.
GenerationResult generate(Model& model, std::span<const std::int32_t> prompt, const GenerationOptions& options,
                          const std::function<void(std::int32_t)>& on_token);

}  // namespace strata
