#include "core/tokenizer/sentencepiece_tokenizer.hpp"

#include <algorithm>
#include <cctype>

#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include "core/tokenizer/utf8.hpp"

namespace strata {
namespace {

class SentencePieceEncoder final : public TokenEncoder {
 public:
  SentencePieceEncoder(const sentencepiece::SentencePieceProcessor& processor,
                       const std::vector<SentencePieceTokenizer::SpecialPiece>& specials)
      : processor_(processor), specials_(specials) {}

  void encode(std::string_view text, std::vector<std::uint32_t>& ids) override {
    if (const auto bad = first_invalid_utf8(text))
      throw TokenizerError("the text is not valid UTF-8 at byte " + std::to_string(*bad));
    // The control and unknown pieces spelled in the text are their ids, as tokenizer.json readers
    // treat them (their added tokens); the stretches between them are encoded one by one.
    std::size_t begin = 0;
    for (std::size_t i = 0; i < text.size();) {
      const SentencePieceTokenizer::SpecialPiece* special = special_at(text, i);
      if (special == nullptr) {
        ++i;
        continue;
      }
      encode_stretch(text.substr(begin, i - begin), ids);
      ids.push_back(special->id);
      i += special->piece.size();
      begin = i;
    }
    encode_stretch(text.substr(begin), ids);
  }

 private:
  const SentencePieceTokenizer::SpecialPiece* special_at(std::string_view text, std::size_t i) const {
    if (text[i] != '<') return nullptr;    // every control piece SentencePiece writes is <...>
    for (const auto& special : specials_)  // longest first
      if (text.compare(i, special.piece.size(), special.piece) == 0) return &special;
    return nullptr;
  }

  void encode_stretch(std::string_view text, std::vector<std::uint32_t>& ids) {
    if (text.empty()) return;
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

  const sentencepiece::SentencePieceProcessor& processor_;
  const std::vector<SentencePieceTokenizer::SpecialPiece>& specials_;
  std::vector<int> scratch_;
};

// Protobuf's wire format, as far as finding one field needs: each field is a varint key (number << 3
// | wire type) followed by a varint (type 0), 8 bytes (1), a varint length and that many bytes (2),
// or 4 bytes (5).
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view bytes) : bytes_(bytes) {}
  bool at_end() const { return at_ >= bytes_.size(); }
  std::optional<std::uint64_t> varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64 && at_ < bytes_.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(bytes_[at_++]);
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return value;
    }
    return std::nullopt;
  }
  // Reads one field; its payload when it is length-delimited, its value when it is a varint.
  struct Field {
    std::uint64_t number;
    std::uint64_t value;
    std::string_view bytes;
  };
  std::optional<Field> field() {
    const auto key = varint();
    if (!key) return std::nullopt;
    Field field{*key >> 3, 0, {}};
    switch (*key & 7) {
      case 0: {
        const auto value = varint();
        if (!value) return std::nullopt;
        field.value = *value;
        return field;
      }
      case 1: return skip(8) ? std::optional<Field>(field) : std::nullopt;
      case 5: return skip(4) ? std::optional<Field>(field) : std::nullopt;
      case 2: {
        const auto length = varint();
        if (!length || *length > bytes_.size() - at_) return std::nullopt;
        field.bytes = bytes_.substr(at_, *length);
        at_ += *length;
        return field;
      }
      default: return std::nullopt;  // groups (3, 4) are not in SentencePiece's format
    }
  }

 private:
  bool skip(std::size_t count) {
    if (count > bytes_.size() - at_) return false;
    at_ += count;
    return true;
  }
  std::string_view bytes_;
  std::size_t at_ = 0;
};

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's "▁"

// Whether a piece holds "▁" after a character other than "▁": a piece that could join a word to the
// one after it.
bool joins_words(std::string_view piece) {
  for (std::size_t at = piece.find(kEscapedSpace, 1); at != std::string_view::npos;
       at = piece.find(kEscapedSpace, at + 1)) {
    if (at < kEscapedSpace.size() || piece.substr(at - kEscapedSpace.size(), kEscapedSpace.size()) != kEscapedSpace)
      return true;
  }
  return false;
}

}  // namespace

std::optional<int> sentencepiece_model_type(std::string_view model) {
  constexpr std::uint64_t kTrainerSpec = 2;  // ModelProto.trainer_spec
  constexpr std::uint64_t kModelType = 3;    // TrainerSpec.model_type
  std::optional<int> type;
  ProtoReader reader(model);
  while (!reader.at_end()) {
    const auto field = reader.field();
    if (!field) return std::nullopt;
    if (field->number != kTrainerSpec) continue;
    ProtoReader spec(field->bytes);
    while (!spec.at_end()) {
      const auto inner = spec.field();
      if (!inner) return std::nullopt;
      if (inner->number == kModelType) type = static_cast<int>(inner->value);
    }
  }
  return type.value_or(1);
}

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
  for (int id = 0; id < processor_->GetPieceSize(); ++id) {
    const std::string& piece = processor_->IdToPiece(id);
    if ((processor_->IsControl(id) || processor_->IsUnknown(id)) && piece.size() > 1 && piece.front() == '<')
      specials_.push_back({piece, static_cast<std::uint32_t>(id)});
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const SpecialPiece& a, const SpecialPiece& b) { return a.piece.size() > b.piece.size(); });

  const auto named = [&](const char* key, int model_id) -> std::optional<std::uint32_t> {
    if (const std::optional<std::string> text = config_token_text(config, key, file.parent_path())) {
      const std::string& content = *text;
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
  read_common_config(config, file.parent_path());
  // LLaMA's tokenizers start every text with bos unless tokenizer_config.json says otherwise.
  special_.add_bos = special_.bos.has_value();
  if (const std::optional<bool> add_bos = config_add_bos(config, file.parent_path()))
    special_.add_bos = *add_bos && special_.bos.has_value();
  cut_at_space_ = choose_cut_at_space(bytes);
}

SpaceCut SentencePieceTokenizer::choose_cut_at_space(std::string_view model) const {
  constexpr int kBpe = 2;
  if (sentencepiece_model_type(model) != kBpe) return SpaceCut::never;
  for (int id = 0; id < processor_->GetPieceSize(); ++id) {
    if (joins_words(processor_->IdToPiece(id))) return SpaceCut::never;
  }
  return probe_space_cut([&](std::string_view text) {
    std::vector<int> ids;
    if (!processor_->Encode(text, &ids).ok()) return std::vector<std::uint32_t>{0xFFFFFFFFu};
    return std::vector<std::uint32_t>(ids.begin(), ids.end());
  });
}

std::optional<TextCut> SentencePieceTokenizer::last_exact_cut(std::string_view text) const {
  return last_space_cut(text, cut_at_space_);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<TokenEncoder> SentencePieceTokenizer::make_encoder() const {
  return std::make_unique<SentencePieceEncoder>(*processor_, specials_);
}

std::int64_t SentencePieceTokenizer::vocab_size() const {
  return processor_->GetPieceSize();
}

std::string SentencePieceTokenizer::decode_raw(std::span<const std::uint32_t> ids) const {
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
