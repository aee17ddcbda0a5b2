#include "core/tokenizer/byte_level_bpe.hpp"

#include <algorithm>
#include <cstring>
#include <queue>

#include <nlohmann/json.hpp>

#include "core/tokenizer/unicode_normalization.hpp"
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

std::string type_of(const Json& node) {
  return node.is_object() && node.contains("type") && node["type"].is_string() ? node["type"].get<std::string>()
                                                                               : std::string("?");
}

bool flag(const Json& node, const char* key, bool fallback) {
  if (!node.contains(key) || node[key].is_null()) return fallback;
  return node[key].get<bool>();
}

// A string field that must be empty (or absent, or null) for Strata to implement the model.
void require_empty(const Json& model, const char* key, const std::filesystem::path& file) {
  if (!model.contains(key) || model[key].is_null()) return;
  if (model[key].is_string() && model[key].get<std::string>().empty()) return;
  throw TokenizerError(file.string() + ": model." + key + " = " + model[key].dump() +
                       " is not implemented (byte-level BPE has none)");
}

// The characters the regex must not treat specially in a Split's literal String pattern.
std::string regex_quote(const std::string& literal) {
  std::string quoted;
  for (char c : literal) {
    if (std::strchr("\\^$.|?*+()[]{}", c) != nullptr) quoted += '\\';
    quoted += c;
  }
  return quoted;
}

}  // namespace

ByteLevelBpe::ByteLevelBpe(const Json& json, const std::filesystem::path& file, const Json& config,
                           std::uint64_t fingerprint)
    : fingerprint_(fingerprint) {
  const std::string where = file.string();
  if (!json.is_object()) throw TokenizerError(where + ": not a JSON object");
  if (!json.contains("model") || !json["model"].is_object()) throw TokenizerError(where + ": no \"model\" object");
  const std::string model_type = type_of(json["model"]);
  if (model_type != "BPE")
    throw TokenizerError(where + ": model.type = \"" + model_type +
                         "\" is not implemented (Strata reads tokenizer.json of the BPE kind; a SentencePiece "
                         "tokenizer.model beside it would be read instead)");
  if (json.contains("normalizer") && !json["normalizer"].is_null()) read_normalizer(json["normalizer"], file);
  if (!json.contains("pre_tokenizer") || json["pre_tokenizer"].is_null())
    throw TokenizerError(where + ": no pre_tokenizer: Strata reads byte-level BPE, whose pre-tokenizer is ByteLevel");
  if (type_of(json.value("decoder", Json())) != "ByteLevel")
    throw TokenizerError(where + ": decoder " + type_of(json.value("decoder", Json())) +
                         " is not implemented (byte-level BPE decodes with ByteLevel)");
  read_pre_tokenizer(json["pre_tokenizer"], file);
  check_ids_are_dense(json, file);
  read_model(json["model"], file);
  if (json.contains("added_tokens") && !json["added_tokens"].is_null()) read_added_tokens(json["added_tokens"], file);
  // Chunking a corpus at line starts is exact for the patterns whose newline pieces end at the
  // newline (tokenizer.hpp), with no prefix space added per chunk and no added token spanning lines.
  splits_at_line_starts_ = !add_prefix_space_ && !splits_.empty() &&
                           std::all_of(splits_.begin(), splits_.end(),
                                       [](const auto& regex) {
                                         return regex->pattern() == kGpt2PretokenizerPattern ||
                                                regex->pattern() == kLlama3PretokenizerPattern ||
                                                regex->pattern() == kQwen2PretokenizerPattern;
                                       }) &&
                           std::none_of(added_.begin(), added_.end(), [](const AddedToken& token) {
                             return token.content.find('\n') != std::string::npos;
                           });

  // bos and eos: tokenizer_config.json names them; a template post-processor that starts every
  // text with bos (LLaMA 3's) or add_bos_token says whether documents start with it.
  const auto named = [&](const char* key) -> std::optional<std::uint32_t> {
    if (!config.is_object() || !config.contains(key) || config[key].is_null()) return std::nullopt;
    const Json& value = config[key];
    const std::string content = value.is_object() ? value.value("content", std::string()) : value.get<std::string>();
    const auto id = token_id(content);
    if (!id)
      throw TokenizerError(file.parent_path().string() + "/tokenizer_config.json: " + key + " = \"" + content +
                           "\" is not a token of " + where);
    return id;
  };
  special_.bos = named("bos_token");
  special_.eos = named("eos_token");
  read_common_config(config, file.parent_path());
  if (config.is_object() && config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
    special_.add_bos = config["add_bos_token"].get<bool>() && special_.bos.has_value();
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

ByteLevelBpe::~ByteLevelBpe() = default;

// Ids index tables (id -> bytes), so they must be nearly dense: a file naming id 2,000,000,000 for
// a handful of tokens would otherwise ask for gigabytes. Real vocabularies have no holes at all.
void ByteLevelBpe::check_ids_are_dense(const Json& json, const std::filesystem::path& file) {
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

void ByteLevelBpe::read_pre_tokenizer(const Json& pre_tokenizer, const std::filesystem::path& file) {
  const std::string where = file.string();
  std::vector<Json> steps;
  if (type_of(pre_tokenizer) == "Sequence") {
    for (const Json& step : pre_tokenizer.value("pretokenizers", Json::array())) steps.push_back(step);
  } else {
    steps.push_back(pre_tokenizer);
  }
  if (steps.empty() || type_of(steps.back()) != "ByteLevel")
    throw TokenizerError(where + ": the pre_tokenizer does not end with ByteLevel (found " +
                         (steps.empty() ? std::string("none") : type_of(steps.back())) +
                         "): only byte-level BPE is implemented");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& step = steps[i];
    const std::string type = type_of(step);
    const std::string field = "pre_tokenizer step " + std::to_string(i) + " (" + type + ")";
    if (type == "ByteLevel") {
      if (i + 1 != steps.size()) throw TokenizerError(where + ": " + field + " must be the last step");
      add_prefix_space_ = flag(step, "add_prefix_space", false);
      if (flag(step, "use_regex", true))
        splits_.push_back(std::make_unique<PretokenizerRegex>(kGpt2PretokenizerPattern, where + ": " + field));
    } else if (type == "Split") {
      const std::string behavior = step.value("behavior", std::string());
      if (behavior != "Isolated")
        throw TokenizerError(where + ": " + field + ": behavior \"" + behavior +
                             "\" is not implemented (only \"Isolated\")");
      if (flag(step, "invert", false))
        throw TokenizerError(where + ": " + field + ": invert = true is not implemented");
      const Json& pattern = step.value("pattern", Json());
      if (pattern.contains("Regex") && pattern["Regex"].is_string())
        splits_.push_back(
            std::make_unique<PretokenizerRegex>(pattern["Regex"].get<std::string>(), where + ": " + field));
      else if (pattern.contains("String") && pattern["String"].is_string())
        splits_.push_back(std::make_unique<PretokenizerRegex>(regex_quote(pattern["String"].get<std::string>()),
                                                              where + ": " + field));
      else
        throw TokenizerError(where + ": " + field + ": pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
    } else {
      throw TokenizerError(where + ": " + field +
                           " is not implemented (Strata's byte-level BPE takes Split steps "
                           "then ByteLevel)");
    }
  }
}

void ByteLevelBpe::read_model(const Json& model, const std::filesystem::path& file) {
  const std::string where = file.string();
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    throw TokenizerError(where + ": model.dropout = " + model["dropout"].dump() +
                         " is not implemented (BPE dropout is a training-time augmentation)");
  require_empty(model, "continuing_subword_prefix", file);
  require_empty(model, "end_of_word_suffix", file);
  ignore_merges_ = flag(model, "ignore_merges", false);
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
    token_bytes_[id] = bytes_of_token(token);
    piece_ids_.emplace(token_bytes_[id], id);
  }
  const auto& characters = byte_characters();
  for (std::size_t byte = 0; byte < 256; ++byte) {
    const auto found = token_ids_.find(characters.spelling[byte]);
    if (found == token_ids_.end())
      throw TokenizerError(where + ": model.vocab lacks the token of byte " + std::to_string(byte) + " (\"" +
                           characters.spelling[byte] + "\"): not a byte-level vocabulary");
    byte_ids_[byte] = found->second;
  }
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

// NFC, alone or as the one step of a Sequence (Qwen2's); every other normalizer is refused.
void ByteLevelBpe::read_normalizer(const Json& normalizer, const std::filesystem::path& file) {
  const bool nfc = type_of(normalizer) == "NFC";
  const Json steps = type_of(normalizer) == "Sequence" ? normalizer.value("normalizers", Json()) : Json();
  const bool nfc_sequence = steps.is_array() && steps.size() == 1 && type_of(steps[0]) == "NFC";
  if (!nfc && !nfc_sequence)
    throw TokenizerError(file.string() + ": normalizer " + normalizer.dump().substr(0, 200) +
                         " is not implemented (Strata implements NFC, Qwen2's, alone or as a one-step Sequence)");
  nfc_ = true;
}

void ByteLevelBpe::read_added_tokens(const Json& added, const std::filesystem::path& file) {
  const std::string where = file.string();
  if (!added.is_array()) throw TokenizerError(where + ": added_tokens is not a list");
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
    added_.push_back({content, id32, flag(token, "lstrip", false), flag(token, "rstrip", false)});
    added_first_byte_[static_cast<unsigned char>(content[0])] = true;
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
}

std::optional<std::uint32_t> ByteLevelBpe::token_id(const std::string& token) const {
  const auto found = token_ids_.find(token);
  if (found == token_ids_.end()) return std::nullopt;
  return found->second;
}

std::optional<TextCut> ByteLevelBpe::last_exact_cut(std::string_view text) const {
  if (!splits_at_line_starts_) return std::nullopt;
  // After a newline that follows a non-space, before an ASCII letter.
  for (std::size_t p = text.size(); p-- > 2;) {
    if (text[p - 1] != '\n') continue;
    const auto before = static_cast<unsigned char>(text[p - 2]);
    if (std::isalpha(static_cast<unsigned char>(text[p])) && !std::isspace(before)) return TextCut{p, p};
  }
  return std::nullopt;
}

std::string ByteLevelBpe::decode_raw(std::span<const std::uint32_t> ids) const {
  std::string text;
  for (std::uint32_t id : ids) {
    if (id >= token_bytes_.size() || !token_defined_[id])
      throw TokenizerError("token " + std::to_string(id) + " is not in the tokenizer's vocabulary of " +
                           std::to_string(token_bytes_.size()));
    text += token_bytes_[id];
  }
  return text;
}

// ---- encoding ----

class ByteLevelBpeEncoder final : public TokenEncoder {
 public:
  explicit ByteLevelBpeEncoder(const ByteLevelBpe& bpe) : bpe_(bpe) {
    for (const auto& regex : bpe.splits_) matchers_.push_back(std::make_unique<PretokenizerRegex::Matcher>(*regex));
  }

  void encode(std::string_view text, std::vector<std::uint32_t>& ids) override {
    if (const auto bad = first_invalid_utf8(text))
      throw TokenizerError("the text is not valid UTF-8 at byte " + std::to_string(*bad));
    // Cut out the added tokens, then encode the stretches between them.
    std::size_t stretch = 0;
    std::size_t i = 0;
    while (i < text.size()) {
      const ByteLevelBpe::AddedToken* token = added_token_at(text, i);
      if (token == nullptr) {
        ++i;
        continue;
      }
      std::size_t stretch_end = i;
      if (token->lstrip)
        while (stretch_end > stretch && is_space(text[stretch_end - 1])) --stretch_end;
      encode_stretch(text.substr(stretch, stretch_end - stretch), ids);
      ids.push_back(token->id);
      i += token->content.size();
      if (token->rstrip)
        while (i < text.size() && is_space(text[i])) ++i;
      stretch = i;
    }
    encode_stretch(text.substr(stretch), ids);
  }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

  const ByteLevelBpe::AddedToken* added_token_at(std::string_view text, std::size_t i) const {
    if (!bpe_.added_first_byte_[static_cast<unsigned char>(text[i])]) return nullptr;
    for (const auto& token : bpe_.added_)  // longest first
      if (text.compare(i, token.content.size(), token.content) == 0) return &token;
    return nullptr;
  }

  void encode_stretch(std::string_view stretch, std::vector<std::uint32_t>& ids) {
    if (stretch.empty()) return;
    if (bpe_.nfc_ && to_nfc(stretch, normalized_)) stretch = normalized_;
    std::string_view text = stretch;
    if (bpe_.add_prefix_space_ && stretch.front() != ' ') {
      prefixed_.assign(1, ' ');
      prefixed_.append(stretch);
      text = prefixed_;
    }
    // Split by each pre-tokenizer regex in turn; each piece of one is split by the next.
    pieces_.assign({0, text.size()});
    for (auto& matcher : matchers_) {
      next_pieces_.assign(1, 0);
      for (std::size_t p = 1; p < pieces_.size(); ++p) {
        const std::size_t begin = pieces_[p - 1];
        ends_.clear();
        matcher->split(text.substr(begin, pieces_[p] - begin), ends_);
        for (std::size_t end : ends_) next_pieces_.push_back(begin + end);
      }
      pieces_.swap(next_pieces_);
    }
    for (std::size_t p = 1; p < pieces_.size(); ++p)
      encode_piece(text.substr(pieces_[p - 1], pieces_[p] - pieces_[p - 1]), ids);
  }

  void encode_piece(std::string_view piece, std::vector<std::uint32_t>& ids) {
    if (piece.size() == 1) {
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
    merge_bytes(piece, ids);
    if (piece.size() <= kCachedPieceBytes) {
      if (cache_.size() >= kCacheEntries) cache_.clear();  // a bound on memory, not an LRU
      cache_.emplace(key, std::vector<std::uint32_t>(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end()));
    }
  }

  // The merge loop over a linked list of symbols and a heap of candidate pairs ordered by (rank,
  // position): O(n log n) in the piece's bytes, so a long run of spaces or digits stays cheap.
  void merge_bytes(std::string_view piece, std::vector<std::uint32_t>& ids) {
    const auto n = static_cast<std::int32_t>(piece.size());
    symbols_.resize(piece.size());
    for (std::int32_t i = 0; i < n; ++i)
      symbols_[static_cast<std::size_t>(i)] = {
          bpe_.byte_ids_[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])], i - 1,
          i + 1 < n ? i + 1 : -1};
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

  const ByteLevelBpe& bpe_;
  std::vector<std::unique_ptr<PretokenizerRegex::Matcher>> matchers_;
  std::unordered_map<std::string, std::vector<std::uint32_t>> cache_;
  std::string prefixed_;
  std::string normalized_;  // a stretch in NFC
  std::vector<std::size_t> pieces_, next_pieces_, ends_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap_;
};

std::unique_ptr<TokenEncoder> ByteLevelBpe::make_encoder() const {
  return std::make_unique<ByteLevelBpeEncoder>(*this);
}

}  // namespace strata
