#pragma once
// A Hugging Face tokenizer.json of the BPE kind with the ByteLevel pre-tokenizer and decoder, as
// GPT-2, LLaMA 3, SmolLM and Qwen2 ship. Encoding a text:
//   1. added tokens (<|endoftext|>, <|begin_of_text|>, ...) are cut out first, leftmost and longest,
//      from the text as given (HF's `normalized: false`; an ASCII token reads the same either way);
//   2. every stretch between them is put in NFC when the normalizer says so (Qwen2's), then split by the
//   pre-tokenizer's regex into pieces (GPT-2's
//      built-in pattern, or the patterns of Split pre-tokenizers in a Sequence);
//   3. each piece's bytes are tokens of their own (the vocabulary holds all 256, spelled through
//      GPT-2's byte-to-character map), merged pair by pair, lowest merge rank first and leftmost
//      among equals, until no listed merge applies; with ignore_merges a piece that is a whole
//      vocabulary entry is that entry.
// Decoding maps each token's characters back to its bytes.
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tokenizer/pretokenizer_regex.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata {

class ByteLevelBpe final : public Tokenizer {
 public:
  // `json` is the parsed tokenizer.json at `file`; `config` the parsed tokenizer_config.json
  // (null when there is none). Throws TokenizerError naming the file and the field Strata does
  // not implement or finds malformed.
  ByteLevelBpe(const nlohmann::json& json, const std::filesystem::path& file, const nlohmann::json& config,
               std::uint64_t fingerprint);
  ~ByteLevelBpe() override;

  std::unique_ptr<TokenEncoder> make_encoder() const override;
  std::string decode_raw(std::span<const std::uint32_t> ids) const override;
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(token_bytes_.size()); }
  std::string kind() const override { return "byte-level BPE (tokenizer.json)"; }
  std::uint64_t fingerprint() const override { return fingerprint_; }
  std::optional<TextCut> last_exact_cut(std::string_view text) const override;

  // The id of a vocabulary entry or added token spelled as tokenizer.json spells it.
  std::optional<std::uint32_t> token_id(const std::string& token) const;

 private:
  friend class ByteLevelBpeEncoder;
  struct Merge {
    std::uint32_t rank;
    std::uint32_t merged;
  };
  struct AddedToken {
    std::string content;
    std::uint32_t id;
    bool lstrip;
    bool rstrip;
  };

  static void check_ids_are_dense(const nlohmann::json& json, const std::filesystem::path& file);
  void read_model(const nlohmann::json& model, const std::filesystem::path& file);
  void read_normalizer(const nlohmann::json& normalizer, const std::filesystem::path& file);
  void read_pre_tokenizer(const nlohmann::json& pre_tokenizer, const std::filesystem::path& file);
  void read_added_tokens(const nlohmann::json& added, const std::filesystem::path& file);

  std::uint64_t fingerprint_;
  std::unordered_map<std::string, std::uint32_t> token_ids_;  // as spelled in the file
  std::unordered_map<std::string, std::uint32_t> piece_ids_;  // a vocabulary entry's bytes -> id
  std::array<std::uint32_t, 256> byte_ids_{};                 // the single-byte tokens
  std::unordered_map<std::uint64_t, Merge> merges_;           // (left << 32 | right) -> rank, result
  std::vector<std::string> token_bytes_;                      // id -> the bytes it decodes to
  std::vector<bool> token_defined_;                           // an id no entry names cannot decode
  std::vector<AddedToken> added_;                             // longest first
  std::array<bool, 256> added_first_byte_{};
  std::vector<std::unique_ptr<PretokenizerRegex>> splits_;  // applied in order
  bool nfc_ = false;                                        // normalizer NFC
  bool add_prefix_space_ = false;
  bool ignore_merges_ = false;
  bool splits_at_line_starts_ = false;
};

}  // namespace strata
