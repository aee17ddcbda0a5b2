#include "core/generate/generator.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

namespace strata {

GenerationResult generate(Model& model, std::span<const std::int32_t> prompt, const GenerationOptions& options,
                          const std::function<void(std::int32_t)>& on_token) {
  const std::int64_t context = model.seq_len();
  const auto prompt_length = static_cast<std::int64_t>(prompt.size());
  if (prompt_length < 1 || prompt_length > context)
    throw std::invalid_argument("generate: a prompt of " + std::to_string(prompt_length) + " tokens for a context of " +
                                std::to_string(context));
  const ModelInfo info = model.info();
  KvCache cache(model.backend(), model.n_layer(), context, static_cast<std::int64_t>(info.n_kv_head) * info.head_dim);
  GenerationResult result;
  result.kv_cache_bytes = cache.bytes();
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  std::vector<float> logits = model.decode(prompt, 0, cache);
  result.prefill_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  start = Clock::now();
  std::int64_t length = prompt_length;  // positions in the cache
  for (int step = 0; step < options.max_new_tokens; ++step) {
    std::span<const float> candidates = logits;
    if (options.vocabulary > 0 && static_cast<std::size_t>(options.vocabulary) < logits.size())
      candidates = candidates.first(static_cast<std::size_t>(options.vocabulary));
    const std::int32_t token = sample_token(candidates, options.sampling, static_cast<std::uint64_t>(step));
    result.tokens.push_back(token);
    on_token(token);
    if (options.stop_token && token == *options.stop_token) {
      result.stopped = StopReason::stop_token;
      break;
    }
    if (length == context) {  // the new token has no position left to be read at
      result.stopped = StopReason::context;
      break;
    }
    if (step + 1 == options.max_new_tokens) break;
    const std::int32_t next[] = {token};
    logits = model.decode(next, length, cache);
    ++length;
  }
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace strata
