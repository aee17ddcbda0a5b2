#include "core/tokenizer/tokenizer.hpp"

#include <cctype>
#include <fstream>
#include <iterator>
#include <utility>

#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/tokenizer/bpe_tokenizer.hpp"
#include "core/tokenizer/sentencepiece_tokenizer.hpp"

namespace strata {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path.string() + ": cannot open for reading");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw TokenizerError(path.string() + ": read error");
  return bytes;
}

nlohmann::json parse_json(const std::string& bytes, const std::filesystem::path& path) {
  try {
    return nlohmann::json::parse(bytes);
  } catch (const nlohmann::json::exception& error) {
    throw TokenizerError(path.string() + ": not valid JSON: " + error.what());
  }
}

bool is_file(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

}  // namespace

std::string Tokenizer::decode(std::span<const std::uint32_t> ids) const {
  std::string text = decode_raw(ids);
  return clean_up_spaces_ ? clean_up_tokenization(text) : text;
}

std::string Tokenizer::decode_continuation(std::span<const std::uint32_t> prompt,
                                           std::span<const std::uint32_t> continuation, bool final) const {
  std::vector<std::uint32_t> both(prompt.begin(), prompt.end());
  both.insert(both.end(), continuation.begin(), continuation.end());
  const std::string whole = decode_raw(both), before = decode_raw(prompt);
  std::string raw = whole.starts_with(before) ? whole.substr(before.size()) : decode_raw(continuation);
  // A character SentencePiece spells in byte pieces reads as U+FFFD until its last byte comes.
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  if (!final)
    while (raw.ends_with(kReplacement)) raw.resize(raw.size() - kReplacement.size());
  if (!clean_up_spaces_) return raw;
  if (!final) raw.resize(settled_length(raw));
  return clean_up_tokenization(raw);
}

bool is_cuttable_space(std::string_view text, std::size_t at) {
  return at > 0 && at + 1 < text.size() && text[at] == ' ' && std::isalnum(static_cast<unsigned char>(text[at - 1])) &&
         std::isalpha(static_cast<unsigned char>(text[at + 1]));
}

SpaceCut probe_space_cut(const std::function<std::vector<std::uint32_t>(std::string_view)>& ids_of) {
  bool dropping = true, keeping = true;
  for (std::string_view probe : {"a b", "The cat sat on the mat", "x1 y2 z3 w", "one two  three"}) {
    const std::vector<std::uint32_t> whole = ids_of(probe);
    for (std::size_t at = 0; at < probe.size(); ++at) {
      if (!is_cuttable_space(probe, at)) continue;
      const std::vector<std::uint32_t> before = ids_of(probe.substr(0, at));
      const auto joined = [&](std::size_t resume) {
        std::vector<std::uint32_t> ids = before;
        const std::vector<std::uint32_t> after = ids_of(probe.substr(resume));
        ids.insert(ids.end(), after.begin(), after.end());
        return ids == whole;
      };
      dropping = dropping && joined(at + 1);
      keeping = keeping && joined(at);
    }
  }
  return dropping ? SpaceCut::dropping_the_space : keeping ? SpaceCut::keeping_the_space : SpaceCut::never;
}

std::optional<TextCut> last_space_cut(std::string_view text, SpaceCut cut) {
  if (cut == SpaceCut::never) return std::nullopt;
  for (std::size_t at = text.size(); at-- > 0;)
    if (is_cuttable_space(text, at)) return TextCut{at, cut == SpaceCut::dropping_the_space ? at + 1 : at};
  return std::nullopt;
}

std::size_t settled_length(std::string_view text) {
  for (std::size_t end = text.size(); end >= 3; --end)
    if (text[end - 1] != ' ' && text[end - 2] != ' ' && text[end - 3] != ' ') return end;
  return 0;
}

void Tokenizer::read_common_config(const nlohmann::json& config, const std::filesystem::path& directory) {
  if (!config.is_object() || !config.contains("clean_up_tokenization_spaces")) return;
  const nlohmann::json& flag = config["clean_up_tokenization_spaces"];
  if (flag.is_null()) return;
  if (!flag.is_boolean())
    throw TokenizerError((directory / "tokenizer_config.json").string() +
                         ": clean_up_tokenization_spaces = " + flag.dump() + " is not true or false");
  clean_up_spaces_ = flag.get<bool>();
}

std::optional<std::string> Tokenizer::config_token_text(const nlohmann::json& config, const char* key,
                                                        const std::filesystem::path& directory) {
  if (!config.is_object() || !config.contains(key) || config[key].is_null()) return std::nullopt;
  const nlohmann::json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  throw TokenizerError((directory / "tokenizer_config.json").string() + ": " + key + " = " + value.dump() +
                       " is neither a token's text nor an object with its \"content\"");
}

std::optional<bool> Tokenizer::config_add_bos(const nlohmann::json& config, const std::filesystem::path& directory) {
  if (!config.is_object() || !config.contains("add_bos_token") || config["add_bos_token"].is_null())
    return std::nullopt;
  const nlohmann::json& flag = config["add_bos_token"];
  if (!flag.is_boolean())
    throw TokenizerError((directory / "tokenizer_config.json").string() + ": add_bos_token = " + flag.dump() +
                         " is not true or false");
  return flag.get<bool>();
}

std::string clean_up_tokenization(std::string_view text) {
  std::string out(text);
  const auto replace_all = [&out](std::string_view from, std::string_view to) {
    std::string result;
    result.reserve(out.size());
    std::size_t at = 0;
    for (std::size_t found; (found = out.find(from, at)) != std::string::npos; at = found + from.size())
      result.append(out, at, found - at).append(to);
    result.append(out, at, std::string::npos);
    out = std::move(result);
  };
  for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{" .", "."},
                                 {" ?", "?"},
                                 {" !", "!"},
                                 {" ,", ","},
                                 {" ' ", "'"},
                                 {" n't", "n't"},
                                 {" 'm", "'m"},
                                 {" 's", "'s"},
                                 {" 've", "'ve"},
                                 {" 're", "'re"}})
    replace_all(from, to);
  return out;
}

std::vector<std::uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::uint32_t> ids;
  make_encoder()->encode(text, ids);
  return ids;
}

bool has_tokenizer(const std::filesystem::path& directory) {
  return is_file(directory / "tokenizer.json") || is_file(directory / "tokenizer.model");
}

namespace {

nlohmann::json parse_config(std::string_view config_text, const std::filesystem::path& directory) {
  if (config_text.empty()) return nlohmann::json();
  const auto path = directory / "tokenizer_config.json";
  nlohmann::json config = parse_json(std::string(config_text), path);
  if (!config.is_object()) throw TokenizerError(path.string() + ": not a JSON object");
  return config;
}

std::uint64_t fingerprint_of(std::string_view bytes, std::string_view config_text) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), XXH3_64bits(config_text.data(), config_text.size()));
}

// A field of the wrong JSON type deep inside; the readers' own checks name the common ones.
template <typename Read>
std::unique_ptr<Tokenizer> naming_type_errors(const std::filesystem::path& directory, Read read) {
  try {
    return read();
  } catch (const nlohmann::json::exception& error) {
    throw TokenizerError(directory.string() + ": a tokenizer file has a field of the wrong type: " + error.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> read_tokenizer_json(std::string_view json_text, std::string_view config_text,
                                               const std::filesystem::path& directory) {
  return naming_type_errors(directory, [&]() -> std::unique_ptr<Tokenizer> {
    const auto path = directory / "tokenizer.json";
    const nlohmann::json json = parse_json(std::string(json_text), path);
    return std::make_unique<BpeTokenizer>(json, path, parse_config(config_text, directory),
                                          fingerprint_of(json_text, config_text));
  });
}

std::unique_ptr<Tokenizer> read_sentencepiece_model(std::string_view model, std::string_view config_text,
                                                    const std::filesystem::path& directory) {
  return naming_type_errors(directory, [&]() -> std::unique_ptr<Tokenizer> {
    return std::make_unique<SentencePieceTokenizer>(std::string(model), directory / "tokenizer.model",
                                                    parse_config(config_text, directory),
                                                    fingerprint_of(model, config_text));
  });
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& directory) {
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error))
    throw TokenizerError(directory.string() +
                         ": not a directory (a tokenizer is a directory holding tokenizer.json "
                         "or tokenizer.model)");
  const auto json_path = directory / "tokenizer.json";
  const auto model_path = directory / "tokenizer.model";
  const auto config_path = directory / "tokenizer_config.json";
  if (!is_file(json_path) && !is_file(model_path))
    throw TokenizerError(directory.string() + ": holds neither tokenizer.json nor tokenizer.model");
  const std::string config = is_file(config_path) ? read_file(config_path) : std::string();
  if (is_file(json_path)) {
    try {
      return read_tokenizer_json(read_file(json_path), config, directory);
    } catch (const UnsupportedTokenizerModel&) {
      // A tokenizer.json of another kind (Unigram, WordPiece) beside a SentencePiece model: the
      // model is read. A broken or unreadable tokenizer.json is an error, never a quiet switch.
      if (!is_file(model_path)) throw;
    }
  }
  return read_sentencepiece_model(read_file(model_path), config, directory);
}

}  // namespace strata
