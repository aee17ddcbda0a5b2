#include "core/tokenizer/bpe_tokenizer.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <queue>

#include "core/tokenizer/tokenizer_json_support.hpp"
#include "core/tokenizer/utf8.hpp"

namespace strata {
namespace {

using Json = nlohmann::json;

std::string utf8_of(std::uint32_t code) {
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | code >> 6);
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | code >> 12);
    out += static_cast<char>(0x80 | (code >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
  return out;
}

// GPT-2's byte-to-character map: printable bytes stand for themselves, the other 68 (controls,
// space, 0x7F-0xA0, the soft hyphen) for the characters from U+0100 up, in byte order.
struct ByteCharacters {
  std::array<std::string, 256> spelling;
  std::unordered_map<std::string, unsigned char> byte_of;
  ByteCharacters() {
    std::uint32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
      spelling[static_cast<std::size_t>(byte)] = utf8_of(printable ? static_cast<std::uint32_t>(byte) : next++);
      byte_of[spelling[static_cast<std::size_t>(byte)]] = static_cast<unsigned char>(byte);
    }
  }
};

const ByteCharacters& byte_characters() {
  static const ByteCharacters characters;  // immutable after construction
  return characters;
}

// A vocabulary entry's bytes: each character mapped back through the byte map. A character the
// map does not hold (a special token spelled in plain Unicode) stands for its own UTF-8.
std::string bytes_of_token(const std::string& token) {
  const auto& characters = byte_characters();
  std::string bytes;
  std::size_t i = 0;
  while (i < token.size()) {
    std::size_t length = 1;
    const auto lead = static_cast<unsigned char>(token[i]);
    if (lead >= 0xF0)
      length = 4;
    else if (lead >= 0xE0)
      length = 3;
    else if (lead >= 0xC0)
      length = 2;
    length = std::min(length, token.size() - i);
    const std::string character = token.substr(i, length);
    const auto found = characters.byte_of.find(character);
    if (found != characters.byte_of.end())
      bytes += static_cast<char>(found->second);
    else
      bytes += character;
    i += length;
  }
  return bytes;
}

using tokenizer_json::type_of;

constexpr std::string_view kWordMark = "\xE2\x96\x81";  // U+2581, "▁", SentencePiece's space

bool ends_with_word_mark(std::string_view text) {
  return text.ends_with(kWordMark);
}

bool flag(const Json& node, const char* key, bool fallback) {
  return tokenizer_json::flag(node, key, fallback, std::string("tokenizer.json: ") + key);
}

// A string field that must be empty (or absent, or null) for Strata to implement the model.
void require_empty(const Json& model, const char* key, const std::filesystem::path& file) {
  if (!model.contains(key) || model[key].is_null()) return;
  if (model[key].is_string() && model[key].get<std::string>().empty()) return;
  throw TokenizerError(file.string() + ": model." + key + " = " + model[key].dump() +
                       " is not implemented (byte-level BPE has none)");
}

}  // namespace

BpeTokenizer::BpeTokenizer(const Json& json, const std::filesystem::path& file, const Json& config,
                           std::uint64_t fingerprint)
    : fingerprint_(fingerprint) {
  const std::string where = file.string();
  if (!json.is_object()) throw TokenizerError(where + ": not a JSON object");
  if (!json.contains("model") || !json["model"].is_object()) throw TokenizerError(where + ": no \"model\" object");
  const std::string model_type = type_of(json["model"]);
  if (model_type != "BPE")
    throw UnsupportedTokenizerModel(where + ": model.type = \"" + model_type +
                                    "\" is not implemented (Strata reads tokenizer.json of the BPE kind; a "
                                    "SentencePiece tokenizer.model beside it would be read instead)");
  normalizer_ = TextNormalizer(json.value("normalizer", Json()), where);
  pre_tokenizer_ = std::make_unique<PreTokenizer>(json.value("pre_tokenizer", Json()), where);
  decoder_ = std::make_unique<TokenDecoder>(json.value("decoder", Json()), where);
  byte_level_ = pre_tokenizer_->byte_level();
  // A byte-level vocabulary spells bytes through GPT-2's map, which only the ByteLevel decoder reads
  // back, and the ByteLevel decoder reads nothing else.
  if (byte_level_ != decoder_->byte_level())
    throw TokenizerError(where +
                         (byte_level_ ? ": the pre-tokenizer ends with ByteLevel but the decoder is not "
                                        "ByteLevel"
                                      : ": the decoder is ByteLevel but the pre-tokenizer does not end "
                                        "with ByteLevel") +
                         ": not implemented");
  check_ids_are_dense(json, file);
  read_model(json["model"], file);
  if (json.contains("added_tokens") && !json["added_tokens"].is_null()) read_added_tokens(json["added_tokens"], file);
  // Chunking a corpus at line starts is exact for the patterns whose newline pieces end at the
  // newline (tokenizer.hpp), with nothing added per chunk (a prefix space, a Prepend), no
  // normalization that reads across a line end, and no added token spanning lines.
  const std::vector<std::string_view> patterns = pre_tokenizer_->isolated_patterns();
  splits_at_line_starts_ =
      byte_level_ && normalizer_.only_unicode_forms() && normalized_added_.empty() && !patterns.empty() &&
      std::all_of(patterns.begin(), patterns.end(),
                  [](std::string_view pattern) {
                    return pattern == kGpt2PretokenizerPattern || pattern == kLlama3PretokenizerPattern ||
                           pattern == kQwen2PretokenizerPattern;
                  }) &&
      std::none_of(added_.tokens.begin(), added_.tokens.end(),
                   [](const AddedToken& token) { return token.content.find('\n') != std::string::npos; });
  read_special_tokens(json, file, config);
  cut_at_space_ = choose_cut_at_space();
}

// bos and eos: tokenizer_config.json names them; a template post-processor that starts every
// text with bos (LLaMA 2's and 3's, Gemma's) or add_bos_token says whether documents start with it.
void BpeTokenizer::read_special_tokens(const Json& json, const std::filesystem::path& file, const Json& config) {
  const auto named = [&](const char* key) -> std::optional<std::uint32_t> {
    const std::optional<std::string> text = config_token_text(config, key, file.parent_path());
    if (!text) return std::nullopt;
    const std::string& content = *text;
    const auto id = token_id(content);
    if (!id)
      throw TokenizerError(file.parent_path().string() + "/tokenizer_config.json: " + key + " = \"" + content +
                           "\" is not a token of " + file.string());
    return id;
  };
  special_.bos = named("bos_token");
  special_.eos = named("eos_token");
  read_common_config(config, file.parent_path());
  if (const std::optional<bool> add_bos = config_add_bos(config, file.parent_path())) {
    special_.add_bos = *add_bos && special_.bos.has_value();
  } else if (special_.bos && json.contains("post_processor")) {
    // The template may stand alone or inside a Sequence of processors (LLaMA 3: ByteLevel, then it).
    std::vector<Json> processors{json["post_processor"]};
    if (type_of(json["post_processor"]) == "Sequence")
      processors = json["post_processor"].value("processors", Json::array()).get<std::vector<Json>>();
    for (const Json& processor : processors) {
      if (type_of(processor) != "TemplateProcessing") continue;
      const Json& single = processor.value("single", Json::array());
      if (single.is_array() && !single.empty() && single[0].contains("SpecialToken"))
        special_.add_bos = token_id(single[0]["SpecialToken"].value("id", std::string())) == special_.bos;
    }
  }
}

BpeTokenizer::~BpeTokenizer() = default;

// Ids index tables (id -> bytes), so they must be nearly dense: a file naming id 2,000,000,000 for
// a handful of tokens would otherwise ask for gigabytes. Real vocabularies have no holes at all.
void BpeTokenizer::check_ids_are_dense(const Json& json, const std::filesystem::path& file) {
  std::uint64_t largest = 0;
  std::uint64_t defined = 0;
  const auto count = [&](const Json& id) {
    if (!id.is_number_unsigned()) return;  // the readers name the malformed ones
    largest = std::max(largest, id.get<std::uint64_t>());
    ++defined;
  };
  if (json["model"].contains("vocab") && json["model"]["vocab"].is_object())
    for (const auto& [token, id] : json["model"]["vocab"].items()) count(id);
  if (json.contains("added_tokens") && json["added_tokens"].is_array())
    for (const Json& token : json["added_tokens"])
      if (token.is_object() && token.contains("id")) count(token["id"]);
  if (largest >= 2 * defined + 1024)
    throw TokenizerError(file.string() + ": the largest id, " + std::to_string(largest) + ", is far above the " +
                         std::to_string(defined) + " tokens defined: ids must number the tokens from 0");
}

void BpeTokenizer::read_model(const Json& model, const std::filesystem::path& file) {
  const std::string where = file.string();
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    throw TokenizerError(where + ": model.dropout = " + model["dropout"].dump() +
                         " is not implemented (BPE dropout is a training-time augmentation)");
  require_empty(model, "continuing_subword_prefix", file);
  require_empty(model, "end_of_word_suffix", file);
  ignore_merges_ = flag(model, "ignore_merges", false);
  byte_fallback_ = flag(model, "byte_fallback", false);
  fuse_unknown_ = flag(model, "fuse_unk", false);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    throw TokenizerError(where + ": model.vocab is not an object of token: id");
  std::uint32_t largest = 0;
  for (const auto& [token, id_json] : model["vocab"].items()) {
    if (!id_json.is_number_unsigned() || id_json.get<std::uint64_t>() >= (1u << 31))
      throw TokenizerError(where + ": model.vocab[\"" + token + "\"] = " + id_json.dump() + " is not an id");
    const auto id = id_json.get<std::uint32_t>();
    if (!token_ids_.emplace(token, id).second)
      throw TokenizerError(where + ": model.vocab holds \"" + token + "\" twice");
    largest = std::max(largest, id);
  }
  token_bytes_.resize(static_cast<std::size_t>(largest) + 1);
  token_defined_.assign(token_bytes_.size(), false);
  for (const auto& [token, id] : token_ids_) {
    if (token_defined_[id]) throw TokenizerError(where + ": model.vocab gives id " + std::to_string(id) + " twice");
    token_defined_[id] = true;
    token_bytes_[id] = byte_level_ ? bytes_of_token(token) : token;
    piece_ids_.emplace(token_bytes_[id], id);
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unknown = model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
    const auto found = token_ids_.find(unknown);
    if (found == token_ids_.end())
      throw TokenizerError(where + ": model.unk_token = " + model["unk_token"].dump() + " is not in model.vocab");
    unknown_id_ = found->second;
  }
  const auto& characters = byte_characters();
  for (std::size_t byte = 0; byte < 256; ++byte) {
    if (!byte_level_) {
      char spelled[8];
      std::snprintf(spelled, sizeof spelled, "<0x%02X>", static_cast<unsigned>(byte));
      if (const auto found = token_ids_.find(spelled); found != token_ids_.end()) fallback_ids_[byte] = found->second;
      continue;
    }
    const auto found = token_ids_.find(characters.spelling[byte]);
    if (found == token_ids_.end())
      throw TokenizerError(where + ": model.vocab lacks the token of byte " + std::to_string(byte) + " (\"" +
                           characters.spelling[byte] + "\"): not a byte-level vocabulary");
    byte_ids_[byte] = found->second;
  }
  if (!byte_level_) find_joining_tokens();
  if (!model.contains("merges") || !model["merges"].is_array())
    throw TokenizerError(where + ": model.merges is not a list");
  const Json& merges = model["merges"];
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const auto space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
        throw TokenizerError(where + ": model.merges[" + std::to_string(rank) + "] = " + merge.dump() +
                             " is not two tokens separated by one space");
      left = text.substr(0, space), right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
    } else {
      throw TokenizerError(where + ": model.merges[" + std::to_string(rank) + "] = " + merge.dump() +
                           " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const auto left_id = token_ids_.find(left);
    const auto right_id = token_ids_.find(right);
    const auto merged_id = token_ids_.find(left + right);
    if (left_id == token_ids_.end() || right_id == token_ids_.end() || merged_id == token_ids_.end())
      throw TokenizerError(where + ": model.merges[" + std::to_string(rank) + "] = " + merge.dump() +
                           " names a token model.vocab lacks");
    const std::uint64_t key = std::uint64_t{left_id->second} << 32 | right_id->second;
    // A pair listed twice keeps its first (lowest) rank, as the merge loop would use it first.
    merges_.emplace(key, Merge{static_cast<std::uint32_t>(rank), merged_id->second});
  }
}

void BpeTokenizer::read_added_tokens(const Json& added, const std::filesystem::path& file) {
  const std::string where = file.string();
  if (!added.is_array()) throw TokenizerError(where + ": added_tokens is not a list");
  std::string scratch;
  for (std::size_t i = 0; i < added.size(); ++i) {
    const Json& token = added[i];
    const std::string field = where + ": added_tokens[" + std::to_string(i) + "]";
    if (!token.is_object() || !token.contains("id") || !token["id"].is_number_unsigned() ||
        !token.contains("content") || !token["content"].is_string())
      throw TokenizerError(field + " lacks an id or a content");
    if (flag(token, "single_word", false)) throw TokenizerError(field + ": single_word = true is not implemented");
    const std::string content = token["content"].get<std::string>();
    if (content.empty()) throw TokenizerError(field + ": content is empty");
    if (first_invalid_utf8(content)) throw TokenizerError(field + ": content is not valid UTF-8");
    const std::uint64_t id = token["id"].get<std::uint64_t>();
    if (id >= (1u << 31)) throw TokenizerError(field + ": id " + std::to_string(id) + " is out of range");
    if (id >= token_bytes_.size()) {
      token_bytes_.resize(id + 1);
      token_defined_.resize(id + 1, false);
    }
    const auto id32 = static_cast<std::uint32_t>(id);
    // An added token the vocabulary also holds (GPT-2's <|endoftext|>) keeps its vocabulary id.
    if (token_defined_[id32] && token_bytes_[id32] != content)
      throw TokenizerError(field + ": id " + std::to_string(id) + " is already the vocabulary's \"" +
                           token_bytes_[id32] + "\"");
    token_defined_[id32] = true;
    token_bytes_[id32] = content;
    token_ids_.emplace(content, id32);
    // `normalized` tokens are matched in the normalized text, as they read there (Hugging Face's
    // default for tokens that are not special).
    const bool normalized = flag(token, "normalized", !flag(token, "special", false)) && !normalizer_.empty();
    AddedTokens& kind = normalized ? normalized_added_ : added_;
    const std::string matched = normalized ? std::string(normalizer_.apply(content, scratch)) : content;
    if (!matched.empty()) kind.add({matched, id32, flag(token, "lstrip", false), flag(token, "rstrip", false)});
  }
}

void BpeTokenizer::find_joining_tokens() {
  constexpr std::size_t kMostJoiningTokens = 256;  // beyond, each cut would cost more than it saves
  for (const auto& [token, id] : token_ids_) {
    JoiningToken joining{token, {}};
    for (auto at = token.find(kWordMark, 1); at != std::string::npos; at = token.find(kWordMark, at + 1))
      if (!ends_with_word_mark(std::string_view(token).substr(0, at))) joining.joins.push_back(at);
    if (joining.joins.empty()) continue;
    if (joining_.size() == kMostJoiningTokens) {
      joining_.clear();
      return;
    }
    joining_.push_back(std::move(joining));
  }
  cuts_words_ = true;
}

void BpeTokenizer::AddedTokens::add(AddedToken token) {
  if (by_content.contains(token.content)) return;  // the first of two with one content is matched
  std::vector<std::size_t>& sizes = lengths[static_cast<unsigned char>(token.content[0])];
  if (std::find(sizes.begin(), sizes.end(), token.content.size()) == sizes.end()) {
    sizes.push_back(token.content.size());
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
  }
  by_content.emplace(token.content, tokens.size());
  tokens.push_back(std::move(token));
}

const BpeTokenizer::AddedToken* BpeTokenizer::AddedTokens::at(std::string_view text, std::size_t i) const {
  for (std::size_t size : lengths[static_cast<unsigned char>(text[i])]) {  // longest first
    if (size > text.size() - i) continue;
    if (const auto found = by_content.find(text.substr(i, size)); found != by_content.end())
      return &tokens[found->second];
  }
  return nullptr;
}

std::optional<std::uint32_t> BpeTokenizer::token_id(const std::string& token) const {
  const auto found = token_ids_.find(token);
  if (found == token_ids_.end()) return std::nullopt;
  return found->second;
}

SpaceCut BpeTokenizer::choose_cut_at_space() const {
  if (byte_level_ || !cuts_words_ || !normalizer_.keeps_words_apart() || !pre_tokenizer_->splits_only_at_spaces())
    return SpaceCut::never;
  // A joining token across "▁" between an ASCII letter or digit and a letter could span the cut.
  for (const JoiningToken& joining : joining_)
    for (std::size_t join : joining.joins)
      if (join > 0 && std::isalnum(static_cast<unsigned char>(joining.text[join - 1])) &&
          join + kWordMark.size() < joining.text.size() &&
          std::isalpha(static_cast<unsigned char>(joining.text[join + kWordMark.size()])))
        return SpaceCut::never;
  for (const AddedTokens* added : {&added_, &normalized_added_})
    for (const AddedToken& token : added->tokens)
      if (token.content.find(' ') != std::string::npos) return SpaceCut::never;
  const auto encoder = make_encoder();
  return probe_space_cut([&](std::string_view text) {
    std::vector<std::uint32_t> ids;
    encoder->encode(text, ids);
    return ids;
  });
}

std::optional<TextCut> BpeTokenizer::last_exact_cut(std::string_view text) const {
  if (cut_at_space_ != SpaceCut::never) return last_space_cut(text, cut_at_space_);
  if (!splits_at_line_starts_) return std::nullopt;
  // After a newline that follows a non-space, before an ASCII letter.
  for (std::size_t p = text.size(); p-- > 2;) {
    if (text[p - 1] != '\n') continue;
    const auto before = static_cast<unsigned char>(text[p - 2]);
    if (std::isalpha(static_cast<unsigned char>(text[p])) && !std::isspace(before)) return TextCut{p, p};
  }
  return std::nullopt;
}

std::string BpeTokenizer::decode_raw(std::span<const std::uint32_t> ids) const {
  std::string text;
  std::vector<std::string> tokens;
  for (std::uint32_t id : ids) {
    if (id >= token_bytes_.size() || !token_defined_[id])
      throw TokenizerError("token " + std::to_string(id) + " is not in the tokenizer's vocabulary of " +
                           std::to_string(token_bytes_.size()));
    if (byte_level_)
      text += token_bytes_[id];
    else
      tokens.push_back(token_bytes_[id]);
  }
  return byte_level_ ? text : decoder_->decode(std::move(tokens));
}

// ---- encoding ----

class BpeEncoder final : public TokenEncoder {
 public:
  explicit BpeEncoder(const BpeTokenizer& bpe) : bpe_(bpe), splitter_(*bpe.pre_tokenizer_) {}

  void encode(std::string_view text, std::vector<std::uint32_t>& ids) override {
    if (const auto bad = first_invalid_utf8(text))
      throw TokenizerError("the text is not valid UTF-8 at byte " + std::to_string(*bad));
    cut_added_tokens(text, bpe_.added_, ids, [&](std::string_view stretch, bool at_start) {
      std::string_view normalized = bpe_.normalizer_.apply(stretch, normalized_);
      cut_added_tokens(normalized, bpe_.normalized_added_, ids, [&](std::string_view part, bool part_at_start) {
        encode_stretch(part, at_start && part_at_start, ids);
      });
    });
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

  // Cuts `added` tokens out of `text`, leftmost and longest, appending their ids; hands each stretch
  // between them (with whether it starts the text) to `stretch`.
  template <typename Stretch>
  static void cut_added_tokens(std::string_view text, const BpeTokenizer::AddedTokens& added,
                               std::vector<std::uint32_t>& ids, Stretch&& stretch) {
    if (added.empty()) {
      stretch(text, true);
      return;
    }
    std::size_t begin = 0;
    std::size_t i = 0;
    while (i < text.size()) {
      const BpeTokenizer::AddedToken* token =
          added.lengths[static_cast<unsigned char>(text[i])].empty() ? nullptr : added.at(text, i);
      if (token == nullptr) {
        ++i;
        continue;
      }
      std::size_t end = i;
      if (token->lstrip)
        while (end > begin && is_space(text[end - 1])) --end;
      stretch(text.substr(begin, end - begin), begin == 0);
      ids.push_back(token->id);
      i += token->content.size();
      if (token->rstrip)
        while (i < text.size() && is_space(text[i])) ++i;
      begin = i;
    }
    stretch(text.substr(begin), begin == 0);
  }

  void encode_stretch(std::string_view stretch, bool at_text_start, std::vector<std::uint32_t>& ids) {
    if (stretch.empty()) return;
    const std::string_view text = splitter_.split(stretch, at_text_start, pieces_);
    for (const auto& [begin, end] : pieces_) encode_piece(text.substr(begin, end - begin), ids);
  }

  void encode_piece(std::string_view piece, std::vector<std::uint32_t>& ids) {
    if (bpe_.cuts_words_ && !(bpe_.ignore_merges_ && bpe_.piece_ids_.contains(std::string(piece)))) {
      std::size_t word = 0;
      for (auto at = piece.find(kWordMark, 1); at != std::string_view::npos; at = piece.find(kWordMark, at + 1)) {
        if (ends_with_word_mark(piece.substr(0, at)) || joined_at(piece, at)) continue;
        encode_word(piece.substr(word, at - word), ids);
        word = at;
      }
      encode_word(piece.substr(word), ids);
      return;
    }
    encode_word(piece, ids);
  }

  // Whether a joining token lies across the "▁" at `at` in `piece`.
  bool joined_at(std::string_view piece, std::size_t at) const {
    for (const auto& joining : bpe_.joining_)
      for (std::size_t join : joining.joins)
        if (join <= at && piece.compare(at - join, joining.text.size(), joining.text) == 0) return true;
    return false;
  }

  void encode_word(std::string_view piece, std::vector<std::uint32_t>& ids) {
    if (bpe_.byte_level_ && piece.size() == 1) {
      ids.push_back(bpe_.byte_ids_[static_cast<unsigned char>(piece[0])]);
      return;
    }
    const std::string key(piece);
    if (bpe_.ignore_merges_) {
      const auto whole = bpe_.piece_ids_.find(key);
      if (whole != bpe_.piece_ids_.end()) {
        ids.push_back(whole->second);
        return;
      }
    }
    const auto cached = cache_.find(key);
    if (cached != cache_.end()) {
      ids.insert(ids.end(), cached->second.begin(), cached->second.end());
      return;
    }
    const std::size_t first = ids.size();
    if (bpe_.byte_level_)
      byte_symbols(piece);
    else
      character_symbols(piece);
    merge_symbols(ids);
    if (piece.size() <= kCachedPieceBytes) {
      if (cache_.size() >= kCacheEntries) cache_.clear();  // a bound on memory, not an LRU
      cache_.emplace(key, std::vector<std::uint32_t>(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end()));
    }
  }

  // Byte-level: one symbol per byte.
  void byte_symbols(std::string_view piece) {
    initial_.clear();
    for (char c : piece) initial_.push_back(bpe_.byte_ids_[static_cast<unsigned char>(c)]);
  }

  // One symbol per character the vocabulary holds; another is its <0xNN> byte tokens (byte
  // fallback, when the vocabulary has them all) or the unknown token (one for a run with fuse_unk),
  // or, with neither, nothing (as Hugging Face's BPE drops it).
  void character_symbols(std::string_view piece) {
    initial_.clear();
    bool previous_unknown = false;
    for (std::size_t i = 0; i < piece.size();) {
      const std::size_t length = tokenizer_json::character_length(static_cast<unsigned char>(piece[i]));
      character_.assign(piece.substr(i, length));
      i += length;
      if (const auto found = bpe_.piece_ids_.find(character_); found != bpe_.piece_ids_.end()) {
        initial_.push_back(found->second);
        previous_unknown = false;
        continue;
      }
      if (bpe_.byte_fallback_ && std::all_of(character_.begin(), character_.end(), [&](char c) {
            return bpe_.fallback_ids_[static_cast<unsigned char>(c)].has_value();
          })) {
        for (char c : character_) initial_.push_back(*bpe_.fallback_ids_[static_cast<unsigned char>(c)]);
        previous_unknown = false;
        continue;
      }
      if (!bpe_.unknown_id_) continue;
      if (!(bpe_.fuse_unknown_ && previous_unknown)) initial_.push_back(*bpe_.unknown_id_);
      previous_unknown = true;
    }
  }

  // The merge loop over a linked list of symbols and a heap of candidate pairs ordered by (rank,
  // position): O(n log n) in the piece's bytes, so a long run of spaces or digits stays cheap.
  void merge_symbols(std::vector<std::uint32_t>& ids) {
    const auto n = static_cast<std::int32_t>(initial_.size());
    if (n == 0) return;
    symbols_.resize(initial_.size());
    for (std::int32_t i = 0; i < n; ++i)
      symbols_[static_cast<std::size_t>(i)] = {initial_[static_cast<std::size_t>(i)], i - 1, i + 1 < n ? i + 1 : -1};
    heap_ = {};
    const auto push_pair = [&](std::int32_t left) {
      if (left < 0) return;
      const Symbol& a = symbols_[static_cast<std::size_t>(left)];
      if (a.next < 0) return;
      const Symbol& b = symbols_[static_cast<std::size_t>(a.next)];
      const auto found = bpe_.merges_.find(std::uint64_t{a.id} << 32 | b.id);
      if (found != bpe_.merges_.end()) heap_.push({found->second.rank, left, a.id, b.id});
    };
    for (std::int32_t i = 0; i + 1 < n; ++i) push_pair(i);
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      Symbol& a = symbols_[static_cast<std::size_t>(top.position)];
      if (a.id != top.left || a.next < 0) continue;  // stale: a was merged since
      Symbol& b = symbols_[static_cast<std::size_t>(a.next)];
      if (b.id != top.right) continue;
      a.id = bpe_.merges_.at(std::uint64_t{top.left} << 32 | top.right).merged;
      a.next = b.next;
      if (b.next >= 0) symbols_[static_cast<std::size_t>(b.next)].prev = top.position;
      b.id = kGone;
      push_pair(a.prev);
      push_pair(top.position);
    }
    for (std::int32_t i = 0; i >= 0; i = symbols_[static_cast<std::size_t>(i)].next)
      ids.push_back(symbols_[static_cast<std::size_t>(i)].id);
  }

  struct Symbol {
    std::uint32_t id;
    std::int32_t prev;
    std::int32_t next;
  };
  struct Candidate {
    std::uint32_t rank;
    std::int32_t position;
    std::uint32_t left;
    std::uint32_t right;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  static constexpr std::uint32_t kGone = 0xFFFFFFFFu;
  static constexpr std::size_t kCachedPieceBytes = 64;
  static constexpr std::size_t kCacheEntries = 1u << 20;

  const BpeTokenizer& bpe_;
  PreTokenizer::Splitter splitter_;
  std::unordered_map<std::string, std::vector<std::uint32_t>> cache_;
  std::string normalized_;  // a stretch normalized
  std::string character_;
  std::vector<std::pair<std::size_t, std::size_t>> pieces_;
  std::vector<std::uint32_t> initial_;  // a piece's symbols before merging
  std::vector<Symbol> symbols_;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap_;
};

std::unique_ptr<TokenEncoder> BpeTokenizer::make_encoder() const {
  return std::make_unique<BpeEncoder>(*this);
}

}  // namespace strata
