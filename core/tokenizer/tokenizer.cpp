#include "core/tokenizer/tokenizer.hpp"

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/tokenizer/byte_level_bpe.hpp"
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

std::vector<std::uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::uint32_t> ids;
  make_encoder()->encode(text, ids);
  return ids;
}

bool has_tokenizer(const std::filesystem::path& directory) {
  return is_file(directory / "tokenizer.json") || is_file(directory / "tokenizer.model");
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

  std::string config_bytes;
  nlohmann::json config;
  if (is_file(config_path)) {
    config_bytes = read_file(config_path);
    config = parse_json(config_bytes, config_path);
    if (!config.is_object()) throw TokenizerError(config_path.string() + ": not a JSON object");
  }
  const auto fingerprint = [&](const std::string& bytes) {
    return XXH3_64bits_withSeed(bytes.data(), bytes.size(), XXH3_64bits(config_bytes.data(), config_bytes.size()));
  };
  try {
    if (is_file(json_path)) {
      const std::string bytes = read_file(json_path);
      const nlohmann::json json = parse_json(bytes, json_path);
      try {
        return std::make_unique<ByteLevelBpe>(json, json_path, config, fingerprint(bytes));
      } catch (const TokenizerError&) {
        // LLaMA 2's tokenizer.json (a SentencePiece-style BPE with byte fallback) is not one Strata
        // reads, but its tokenizer.model beside it is.
        if (!is_file(model_path)) throw;
      }
    }
    const std::string bytes = read_file(model_path);
    return std::make_unique<SentencePieceTokenizer>(bytes, model_path, config, fingerprint(bytes));
  } catch (const nlohmann::json::exception& error) {
    // A field of the wrong JSON type deep inside; the reader's checks name the common ones.
    throw TokenizerError(directory.string() + ": a tokenizer file has a field of the wrong type: " + error.what());
  }
}

}  // namespace strata
