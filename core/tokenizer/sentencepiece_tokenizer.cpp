#include "core/tokenizer/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "core/tokenizer/utf8.hpp"

namespace strata {
namespace {

class SentencePieceEncoder final : public TokenEncoder {
 public:
  explicit SentencePieceEncoder(const sentencepiece::SentencePieceProcessor& processor) : processor_(processor) {}

  void encode(std::string_view text, std::vector<std::uint32_t>& ids) override {
    if (const auto bad = first_invalid_utf8(text))
      throw TokenizerError("the text is not valid UTF-8 at byte " + std::to_string(*bad));
    scratch_.clear();
    // Encode is const in the library and keeps no state between calls.
    sentencepiece::util::Status status;
    try {
      status = processor_.Encode(text, &scratch_);
    } catch (const std::exception& error) {
      throw TokenizerError(std::string("SentencePiece could not encode the text: ") + error.what());
    }
    if (!status.ok()) throw TokenizerError("SentencePiece could not encode the text: " + status.ToString());
    ids.insert(ids.end(), scratch_.begin(), scratch_.end());
  }

 private:
  const sentencepiece::SentencePieceProcessor& processor_;
  std::vector<int> scratch_;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& bytes, const std::filesystem::path& file,
                                               const nlohmann::json& config, std::uint64_t fingerprint)
    : processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()), fingerprint_(fingerprint) {
  sentencepiece::util::Status status;
  try {
    status = processor_->LoadFromSerializedProto(bytes);
  } catch (const std::exception& error) {
    // The library's own structures (its double-array trie) throw on some malformed models.
    throw TokenizerError(file.string() + ": not a SentencePiece model the library can load: " + error.what());
  }
  if (!status.ok())
    throw TokenizerError(file.string() + ": not a SentencePiece model the library can load: " + status.ToString());
  if (processor_->GetPieceSize() <= 0) throw TokenizerError(file.string() + ": the model has no pieces");

  const auto named = [&](const char* key, int model_id) -> std::optional<std::uint32_t> {
    if (config.is_object() && config.contains(key) && !config[key].is_null()) {
      const nlohmann::json& value = config[key];
      const std::string content = value.is_object() ? value.value("content", std::string()) : value.get<std::string>();
      const int id = processor_->PieceToId(content);
      if (id < 0 || processor_->IdToPiece(id) != content)
        throw TokenizerError(file.parent_path().string() + "/tokenizer_config.json: " + key + " = \"" + content +
                             "\" is not a piece of " + file.string());
      return static_cast<std::uint32_t>(id);
    }
    if (model_id >= 0) return static_cast<std::uint32_t>(model_id);
    return std::nullopt;
  };
  special_.bos = named("bos_token", processor_->bos_id());
  special_.eos = named("eos_token", processor_->eos_id());
  // LLaMA's tokenizers start every text with bos unless tokenizer_config.json says otherwise.
  special_.add_bos = special_.bos.has_value();
  if (config.is_object() && config.contains("add_bos_token") && config["add_bos_token"].is_boolean())
    special_.add_bos = config["add_bos_token"].get<bool>() && special_.bos.has_value();
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<TokenEncoder> SentencePieceTokenizer::make_encoder() const {
  return std::make_unique<SentencePieceEncoder>(*processor_);
}

std::int64_t SentencePieceTokenizer::vocab_size() const {
  return processor_->GetPieceSize();
}

std::string SentencePieceTokenizer::decode(std::span<const std::uint32_t> ids) const {
  std::vector<int> as_int;
  as_int.reserve(ids.size());
  for (std::uint32_t id : ids) {
    if (id >= static_cast<std::uint32_t>(vocab_size()))
      throw TokenizerError("token " + std::to_string(id) + " is not in the tokenizer's vocabulary of " +
                           std::to_string(vocab_size()));
    as_int.push_back(static_cast<int>(id));
  }
  std::string text;
  sentencepiece::util::Status status;
  try {
    status = processor_->Decode(as_int, &text);
  } catch (const std::exception& error) {
    throw TokenizerError(std::string("SentencePiece could not decode: ") + error.what());
  }
  if (!status.ok()) throw TokenizerError("SentencePiece could not decode: " + status.ToString());
  return text;
}

}  // namespace strata
