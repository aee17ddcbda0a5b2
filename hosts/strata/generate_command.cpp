// strata generate: a model continues a prompt, streamed to standard output as it is chosen
// (core/generate/: a KV cache, one prefill, then one position per token). Text goes through the
// manifest's tokenizer ([data] tokenizer, or the [model] from directory's, or --from's); without
// one, text is bytes, as training reads it. The weights are a trained checkpoint's, or a Hugging
// Face directory's, stored as the manifest says (bf16, int8); no training strategy applies.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>

#include "command_support.hpp"
#include "commands.hpp"
#include "core/data/corpus_tokens.hpp"
#include "core/data/token_file.hpp"
#include "core/errors/data_error.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/generate/generator.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/training/evaluation_model.hpp"
#include "core/util/format_bytes.hpp"
#include "exit_codes.hpp"

namespace strata {
namespace {

namespace po = boost::program_options;

constexpr const char* kSynopsis =
    "MANIFEST (--checkpoint DIR | --from HFDIR) (--prompt TEXT | --prompt-file FILE) [--max-new-tokens N] "
    "[--temperature T] [--top-k K] [--top-p P] [--seed S] [--ids]";

struct TextCodec {
  std::unique_ptr<Tokenizer> tokenizer;  // null: bytes
  std::vector<std::int32_t> encode(const std::string& text) const {
    std::vector<std::int32_t> ids;
    if (!tokenizer) {
      for (unsigned char byte : text) ids.push_back(byte);
      return ids;
    }
    if (tokenizer->special().add_bos) ids.push_back(static_cast<std::int32_t>(*tokenizer->special().bos));
    for (std::uint32_t id : tokenizer->encode(text)) ids.push_back(static_cast<std::int32_t>(id));
    return ids;
  }
  // The text `produced` adds after `prompt`, as far as it stays whatever tokens follow; all of it
  // when `final`.
  std::string continuation_text(const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& produced,
                                bool final) const {
    if (!tokenizer) {
      // Bytes; an id above 255 (a vocabulary wider than bytes, untrained rows) is no byte: U+FFFD.
      std::string text;
      for (std::int32_t id : produced) text += id < 256 ? std::string(1, static_cast<char>(id)) : "\xEF\xBF\xBD";
      return text;
    }
    const std::vector<std::uint32_t> before(prompt.begin(), prompt.end()), after(produced.begin(), produced.end());
    return tokenizer->decode_continuation(before, after, final);
  }
};

}  // namespace

int command_generate(const std::vector<std::string>& arguments) {
  CommonArguments common;
  std::string checkpoint, from, prompt, prompt_file, seed_text;
  GenerationOptions generation;
  po::options_description options("generate options");
  add_manifest_options(options, common);
  options.add_options()("checkpoint", po::value(&checkpoint), "a trained run's checkpoint (directory, save or file)")(
      "from", po::value(&from), "a Hugging Face model directory's weights (and its tokenizer)")(
      "prompt", po::value(&prompt), "the text to continue")("prompt-file", po::value(&prompt_file),
                                                            "a file holding the text to continue")(
      "max-new-tokens", po::value(&generation.max_new_tokens)->default_value(64), "tokens to generate at most")(
      "temperature", po::value(&generation.sampling.temperature)->default_value(1.0f),
      "0: greedy (deterministic); above 0: sample from softmax(logits / T)")(
      "top-k", po::value(&generation.sampling.top_k)->default_value(0), "sample among the K likeliest (0: all)")(
      "top-p", po::value(&generation.sampling.top_p)->default_value(1.0f),
      "sample among the likeliest whose probability reaches P (1: all)")(
      "seed", po::value(&seed_text)->default_value("42"), "the sampling seed, 0 to 2^64-1")(
      "ids", "print the new token ids, one line, instead of the text");
  po::variables_map values;
  if (auto code = parse("generate", kSynopsis, options, arguments, values)) return *code;
  const auto refuse = [](const std::string& why) {
    std::cerr << "strata generate: " << why << "\nusage: strata generate " << kSynopsis << '\n';
    return static_cast<int>(kExitInvalidInput);
  };
  if (values.count("prompt") == values.count("prompt-file"))
    return refuse("give exactly one of --prompt and --prompt-file");
  if (!checkpoint.empty() && !from.empty()) return refuse("give --checkpoint or --from, not both");
  if (generation.max_new_tokens < 1) return refuse("--max-new-tokens must be at least 1");
  // Read as text: a number parser for unsigned values would take "-1" as 2^64-1 in silence.
  try {
    std::size_t used = 0;
    if (seed_text.empty() || !std::isdigit(static_cast<unsigned char>(seed_text[0]))) throw std::invalid_argument("");
    generation.sampling.seed = std::stoull(seed_text, &used);
    if (used != seed_text.size()) throw std::invalid_argument("");
  } catch (const std::exception&) {
    return refuse("--seed " + seed_text + " is not a whole number from 0 to 2^64-1");
  }
  if (!(generation.sampling.temperature >= 0.0f) || !std::isfinite(generation.sampling.temperature))
    return refuse("--temperature must be 0 or more");
  if (generation.sampling.top_k < 0) return refuse("--top-k must be 0 or more");
  if (!(generation.sampling.top_p > 0.0f && generation.sampling.top_p <= 1.0f))
    return refuse("--top-p must be in (0, 1]");
  const bool print_ids = values.count("ids") > 0;
  // Standard output carries the generated text alone: the log goes to standard error.
  spdlog::set_default_logger(spdlog::stderr_color_mt("strata-generate"));

  return run_guarded("generate", [&] {
    const Manifest manifest = load_command_manifest(common.manifest, common.overrides, ManifestUse::generation);
    if (!prompt_file.empty()) {
      check_data_file(prompt_file);
      std::ifstream in(prompt_file, std::ios::binary);
      prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    TextCodec codec;
    std::optional<std::filesystem::path> tokenizer_dir = manifest.data.tokenizer;
    if (!tokenizer_dir && !from.empty() && has_tokenizer(from)) tokenizer_dir = from;
    if (tokenizer_dir) {
      codec.tokenizer = load_tokenizer(*tokenizer_dir);
      check_tokenizer_fits(*codec.tokenizer, *tokenizer_dir, manifest.model.vocab());
    } else if (manifest.model.vocab() < 256) {
      throw ManifestError(manifest.path.string() +
                          ": no tokenizer, and text as bytes needs model.vocab >= 256 (it is " +
                          std::to_string(manifest.model.vocab()) + ")");
    }
    std::vector<std::int32_t> prompt_ids = codec.encode(prompt);
    if (prompt_ids.empty() && codec.tokenizer && (codec.tokenizer->special().bos || codec.tokenizer->special().eos)) {
      // As llm.c samples from <|endoftext|>, and train.sample_every with no prompt.
      const SpecialTokens& special = codec.tokenizer->special();
      prompt_ids.push_back(static_cast<std::int32_t>(special.bos ? *special.bos : *special.eos));
      spdlog::info("the prompt is empty: starting from the tokenizer's {} (token {})", special.bos ? "bos" : "eos",
                   prompt_ids.front());
    }
    if (prompt_ids.empty()) throw DataError("the prompt is empty, and the tokenizer has no bos or eos to start from");
    const std::int64_t context = manifest.model.seq_len();
    // Keep the end, which the continuation follows, and a position for the first new token to be
    // read at (a context of one position keeps the last token: one new token, then it is full).
    const std::int64_t kept = std::max<std::int64_t>(context - 1, 1);
    if (static_cast<std::int64_t>(prompt_ids.size()) > kept) {
      const auto dropped = static_cast<std::int64_t>(prompt_ids.size()) - kept;
      spdlog::warn("the prompt is {} tokens, the context {}: its first {} tokens are dropped", prompt_ids.size(),
                   context, dropped);
      prompt_ids.erase(prompt_ids.begin(), prompt_ids.begin() + dropped);
    }
    if (codec.tokenizer && codec.tokenizer->special().eos)
      generation.stop_token = static_cast<std::int32_t>(*codec.tokenizer->special().eos);
    // A model whose vocabulary is larger than its tokenizer's (rows padded for speed, or an
    // embedding grown past the tokenizer) samples text among the ids the tokenizer can write (an
    // id past them stopped the text, exit 2); --ids prints whatever it samples. Bytes write an id
    // past 255 as U+FFFD.
    if (codec.tokenizer && !print_ids && codec.tokenizer->vocab_size() < manifest.model.vocab()) {
      generation.vocabulary = static_cast<int>(codec.tokenizer->vocab_size());
      spdlog::info("the model has {} ids, its tokenizer {}: sampling among the tokenizer's", manifest.model.vocab(),
                   generation.vocabulary);
    }

    PluginRegistry registry = load_plugins(manifest);
    std::optional<std::filesystem::path> checkpoint_path, weights_path;
    if (!checkpoint.empty()) checkpoint_path = checkpoint;
    if (!from.empty()) weights_path = from;
    EvaluationModel run = open_for_generation(manifest, registry, checkpoint_path, weights_path);

    std::vector<std::int32_t> produced;
    std::size_t printed = 0;
    const auto show = [&](bool final) {
      // The text so far, less what is already out: a tokenizer may join tokens across a boundary.
      const std::string text = codec.continuation_text(prompt_ids, produced, final);
      if (text.size() > printed) {
        std::cout << text.substr(printed) << std::flush;
        printed = text.size();
      }
    };
    const GenerationResult result = generate(*run.model, prompt_ids, generation, [&](std::int32_t token) {
      produced.push_back(token);
      if (!print_ids) show(false);
    });
    if (!print_ids) show(true);
    if (print_ids) {
      for (std::size_t i = 0; i < produced.size(); ++i) std::cout << (i ? " " : "") << produced[i];
    }
    std::cout << std::endl;
    const char* why = result.stopped == StopReason::stop_token ? "the end-of-text token"
                      : result.stopped == StopReason::context  ? "the model's context length"
                                                               : "--max-new-tokens";
    std::fprintf(stderr,
                 "prompt %zu tokens: prefill %.1f tokens/s | %zu new tokens: decode %.1f tokens/s | stopped at %s "
                 "| KV cache %s\n",
                 prompt_ids.size(), static_cast<double>(prompt_ids.size()) / std::max(result.prefill_seconds, 1e-9),
                 result.tokens.size(),
                 result.tokens.size() > 1
                     ? static_cast<double>(result.tokens.size() - 1) / std::max(result.decode_seconds, 1e-9)
                     : 0.0,
                 why, format_bytes(result.kv_cache_bytes).c_str());
    if (result.stopped == StopReason::context)
      spdlog::info("generation stopped at the model's context length ({} positions)", context);
    std::cout.flush();
    return static_cast<int>(kExitSuccess);
  });
}

}  // namespace strata
