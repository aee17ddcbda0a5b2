#include "core/training/training_sample.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "core/data/token_file.hpp"
#include "core/device/backends.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/generate/generator.hpp"
#include "core/model/make_model.hpp"
#include "core/model/ops_attention_kernel.hpp"

namespace strata {
namespace {

constexpr std::int64_t kDataPromptTokens = 8;  // a prompt from the validation split

}  // namespace

std::vector<std::int32_t> sample_prompt_ids(const Manifest& manifest, const Tokenizer* tokenizer) {
  const std::string& prompt = manifest.train.sample_prompt;
  std::vector<std::int32_t> ids;
  if (prompt.empty()) return ids;
  if (tokenizer) {
    if (tokenizer->special().add_bos) ids.push_back(static_cast<std::int32_t>(*tokenizer->special().bos));
    for (std::uint32_t id : tokenizer->encode(prompt)) ids.push_back(static_cast<std::int32_t>(id));
  } else if (token_file_format(manifest.data.train) == TokenFileFormat::text_bytes) {
    for (unsigned char byte : prompt) ids.push_back(byte);
  } else {
    throw ManifestError(manifest.path.string() + ": train.sample_prompt is text, but " + manifest.data.train.string() +
                        " is a token file and the run has no tokenizer to encode it ([data] tokenizer)");
  }
  if (static_cast<std::int64_t>(ids.size()) >= manifest.model.seq_len())
    throw ManifestError(manifest.path.string() + ": train.sample_prompt is " + std::to_string(ids.size()) +
                        " tokens, and the model's context is " + std::to_string(manifest.model.seq_len()) +
                        ": leave room for the continuation");
  return ids;
}

TrainingSampler::TrainingSampler(const Manifest& manifest, const Tokenizer* tokenizer, const Dataset& dataset)
    : manifest_(manifest),
      tokenizer_(tokenizer),
      text_is_bytes_(!tokenizer && token_file_format(manifest.data.train) == TokenFileFormat::text_bytes),
      prompt_(sample_prompt_ids(manifest, tokenizer)) {
  if (!prompt_.empty()) return;
  if (tokenizer_ && (tokenizer_->special().bos || tokenizer_->special().eos)) {
    prompt_.push_back(
        static_cast<std::int32_t>(tokenizer_->special().bos ? *tokenizer_->special().bos : *tokenizer_->special().eos));
  } else {
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(manifest.model.seq_len()));
    std::vector<std::int32_t> targets(inputs.size());
    dataset.val_window(0, inputs.data(), targets.data());
    inputs.resize(static_cast<std::size_t>(std::min<std::int64_t>(kDataPromptTokens, manifest.model.seq_len() - 1)));
    prompt_ = std::move(inputs);
  }
}

std::string TrainingSampler::text_of(std::span<const std::int32_t> ids, std::span<const std::int32_t> before) const {
  if (tokenizer_) {
    // A model may have more rows than the tokenizer has ids (model.vocab is at least its size): an
    // id past them, which an early sample can pick, has no text and is left out, said so.
    const auto known = [this](std::int32_t id) { return id >= 0 && id < tokenizer_->vocab_size(); };
    std::vector<std::uint32_t> prompt, continuation;
    for (std::int32_t id : before)
      if (known(id)) prompt.push_back(static_cast<std::uint32_t>(id));
    for (std::int32_t id : ids)
      if (known(id)) continuation.push_back(static_cast<std::uint32_t>(id));
    std::string text = tokenizer_->decode_continuation(prompt, continuation, true);
    if (const std::size_t unknown = ids.size() - continuation.size(); unknown > 0)
      text += " [" + std::to_string(unknown) + " ids past the tokenizer's vocabulary left out]";
    return text;
  }
  std::string text;
  for (std::int32_t id : ids) {
    if (!text_is_bytes_)  // ids, each after a space but the text's first
      text += (text.empty() && before.empty() ? "" : " ") + std::to_string(id);
    else  // a vocabulary wider than bytes has untrained rows past 255: U+FFFD
      text += id < 256 ? std::string(1, static_cast<char>(id)) : "\xEF\xBF\xBD";
  }
  return text;
}

TrainingSample TrainingSampler::sample(Model& model, std::int64_t step) const {
  const std::unique_ptr<Backend> cpu = make_backend("cpu", 0);
  OpsAttentionKernel attention(cpu->ops());
  ModelOptions options;
  options.batch = 1;
  options.purpose = Purpose::evaluation;
  const std::unique_ptr<Model> copy = make_model(manifest_.model, *cpu, attention, options);
  std::map<std::string, const ParameterRows*> by_name;
  for (const ParameterRows& rows : copy->parameters()) by_name.emplace(rows.name, &rows);
  for (const ParameterRows& rows : model.parameters()) {
    if (rows.role == ParameterRole::adapter) continue;  // folded into its matrix
    const auto found = by_name.find(rows.name);
    if (found == by_name.end()) throw std::logic_error("sample: the decoding model has no parameter " + rows.name);
    copy->write_values(*found->second, model.merged_values(rows));
  }
  copy->store().publish_weights();

  GenerationOptions generation;
  generation.sampling.temperature = 0.0f;  // greedy: the same weights give the same text
  generation.max_new_tokens = static_cast<int>(manifest_.train.sample_tokens);
  if (tokenizer_ && tokenizer_->special().eos)
    generation.stop_token = static_cast<std::int32_t>(*tokenizer_->special().eos);
  const GenerationResult result = generate(*copy, prompt_, generation, [](std::int32_t) {});
  return TrainingSample{step, prompt_, result.tokens, text_of(prompt_, {}), text_of(result.tokens, prompt_)};
}

}  // namespace strata
