#pragma once
// A tokenizer.json's decoder: how the tokens' strings, as the file spells them, become text again
// (Hugging Face's decoders, over the list of token strings). Implemented: ByteLevel alone (each
// character back to its byte through GPT-2's map: the BPE reads that from its own table), and in any
// Sequence: Replace, ByteFallback (runs of <0xNN> tokens to their bytes; bytes that are not valid
// UTF-8 become one U+FFFD each, as Hugging Face's Rust library does), Fuse, Strip and Metaspace.
// Anything else is refused by name.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tokenizer/pretokenizer_regex.hpp"

namespace strata {

class TokenDecoder {
 public:
  // `decoder` is tokenizer.json's "decoder" (null: the strings are joined as they are). Throws
  // TokenizerError naming `where` (the file) and the step.
  TokenDecoder(const nlohmann::json& decoder, const std::string& where);
  ~TokenDecoder();
  TokenDecoder(TokenDecoder&&) noexcept;
  TokenDecoder& operator=(TokenDecoder&&) noexcept;

  // The decoder is ByteLevel alone.
  bool byte_level() const noexcept { return byte_level_; }
  // The text of `tokens` (not for byte_level()).
  std::string decode(std::vector<std::string> tokens) const;

 private:
  enum class Kind { replace, byte_fallback, fuse, strip, metaspace };
  struct Step {
    Kind kind;
    std::string pattern;                       // replace: a literal, when no regex
    std::unique_ptr<PretokenizerRegex> regex;  // replace: a regex
    std::string content;                       // replace: the replacement; strip: the character
    std::size_t start = 0, stop = 0;           // strip
    bool strip_first_space = true;             // metaspace: unless its prepend_scheme is never
  };
  void read_step(const nlohmann::json& step, const std::string& where, const std::string& field);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace strata
