#pragma once
// A Hugging Face tokenizer.json of the BPE kind: the byte-level files of GPT-2, LLaMA 3, Qwen 2-3,
// DeepSeek V3, gpt-oss and GPT-4o, and the SentencePiece-style files with byte fallback of LLaMA 2,
// Mistral and Gemma 1-3. Encoding a text:
//   1. added tokens (<|endoftext|>, <s>, <start_of_turn>, ...) are cut out first, leftmost and
//      longest, from the text as given (HF's `normalized: false`), with their lstrip and rstrip;
//   2. every stretch between them goes through the normalizer (text_normalizer.hpp), then the added
//      tokens marked `normalized: true` are cut out of it as they read normalized;
//   3. the pre-tokenizer (pre_tokenizer.hpp) cuts what is left into pieces;
//   4. each piece becomes symbols: its bytes through GPT-2's byte map when the pre-tokenizer ends with
//      ByteLevel (the vocabulary holds all 256), else its characters, a character the vocabulary lacks
//      spelled as its <0xNN> byte tokens (byte_fallback) or as the unknown token (consecutive ones
//      fused with fuse_unk); the symbols are merged pair by pair, lowest merge rank first and leftmost
//      among equals, until no listed merge applies; with ignore_merges a piece that is a whole
//      vocabulary entry is that entry.
// Decoding maps each token back through the byte map (ByteLevel), or runs the decoder's steps over
// the tokens' strings (token_decoder.hpp).
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tokenizer/pre_tokenizer.hpp"
#include "core/tokenizer/text_normalizer.hpp"
#include "core/tokenizer/token_decoder.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata {

// A tokenizer.json whose model is not BPE (WordPiece, Unigram, WordLevel): a tokenizer.model beside
// it may be read instead.
class UnsupportedTokenizerModel : public TokenizerError {
 public:
  using TokenizerError::TokenizerError;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // `json` is the parsed tokenizer.json at `file`; `config` the parsed tokenizer_config.json
  // (null when there is none). Throws TokenizerError naming the file and the field Strata does
  // not implement or finds malformed.
  BpeTokenizer(const nlohmann::json& json, const std::filesystem::path& file, const nlohmann::json& config,
               std::uint64_t fingerprint);
  ~BpeTokenizer() override;

  std::unique_ptr<TokenEncoder> make_encoder() const override;
  std::string decode_raw(std::span<const std::uint32_t> ids) const override;
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(token_bytes_.size()); }
  std::string kind() const override {
    return byte_level_ ? "byte-level BPE (tokenizer.json)" : "BPE with byte fallback (tokenizer.json)";
  }
  std::uint64_t fingerprint() const override { return fingerprint_; }
  std::optional<TextCut> last_exact_cut(std::string_view text) const override;

  // The id of a vocabulary entry or added token spelled as tokenizer.json spells it.
  std::optional<std::uint32_t> token_id(const std::string& token) const;

 private:
  friend class BpeEncoder;
  struct Merge {
    std::uint32_t rank;
    std::uint32_t merged;
  };
  struct AddedToken {
    std::string content;  // as matched: the normalized content for a `normalized` token
    std::uint32_t id;
    bool lstrip;
    bool rstrip;
  };
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const noexcept { return std::hash<std::string_view>{}(text); }
  };
  // Added tokens matched in one kind of text: by content, and per first byte the lengths they come
  // in, longest first, so that a position is tried with a lookup per length (Gemma 3 has 6,415).
  struct AddedTokens {
    std::vector<AddedToken> tokens;
    std::unordered_map<std::string, std::size_t, TextHash, std::equal_to<>> by_content;
    std::array<std::vector<std::size_t>, 256> lengths;
    bool empty() const noexcept { return tokens.empty(); }
    void add(AddedToken token);
    // The longest token at text[i], or null.
    const AddedToken* at(std::string_view text, std::size_t i) const;
  };
  // A vocabulary entry holding "▁" right after another character (Gemma 3's ">▁</"), with the
  // offsets of those "▁": the only tokens a merge could build across such a place in a piece.
  struct JoiningToken {
    std::string text;
    std::vector<std::size_t> joins;
  };

  static void check_ids_are_dense(const nlohmann::json& json, const std::filesystem::path& file);
  void read_model(const nlohmann::json& model, const std::filesystem::path& file);
  void read_added_tokens(const nlohmann::json& added, const std::filesystem::path& file);
  void find_joining_tokens();
  void read_special_tokens(const nlohmann::json& json, const std::filesystem::path& file, const nlohmann::json& config);

  std::uint64_t fingerprint_;
  TextNormalizer normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<TokenDecoder> decoder_;
  bool byte_level_ = false;
  std::unordered_map<std::string, std::uint32_t> token_ids_;      // as spelled in the file
  std::unordered_map<std::string, std::uint32_t> piece_ids_;      // a vocabulary entry's symbols -> id
  std::array<std::uint32_t, 256> byte_ids_{};                     // byte-level: the single-byte tokens
  std::array<std::optional<std::uint32_t>, 256> fallback_ids_{};  // byte fallback: the <0xNN> tokens
  bool byte_fallback_ = false;
  std::optional<std::uint32_t> unknown_id_;
  bool fuse_unknown_ = false;
  std::unordered_map<std::uint64_t, Merge> merges_;  // (left << 32 | right) -> rank, result
  std::vector<std::string> token_bytes_;             // id -> its bytes (byte-level) or its spelling
  std::vector<bool> token_defined_;                  // an id no entry names cannot decode
  AddedTokens added_;                                // matched in the text as given
  AddedTokens normalized_added_;                     // matched in a normalized stretch
  // Not byte-level: a piece may be cut before each "▁" that follows another character (where no
  // joining token lies across), since no merge can join the two sides; then each word is merged on
  // its own and cached, as byte-level pieces are. False when too many entries join words.
  bool cuts_words_ = false;
  std::vector<JoiningToken> joining_;
  // Where a corpus text of a tokenizer that is not byte-level may be cut: at a single space between
  // two ASCII words, the part after it resuming after the space (a Prepend or Metaspace puts its
  // "▁" back) or at it; never when some step could read across (choose_cut_at_space).
  SpaceCut cut_at_space_ = SpaceCut::never;
  SpaceCut choose_cut_at_space() const;
  bool ignore_merges_ = false;
  bool splits_at_line_starts_ = false;
};

}  // namespace strata
