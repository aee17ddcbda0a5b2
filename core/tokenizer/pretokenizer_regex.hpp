#pragma once
// The pre-tokenizer's regex (GPT-2's, LLaMA 3's, or the one a tokenizer.json names), compiled once
// with PCRE2 in UTF and Unicode-property mode and JIT-compiled where the machine allows.
// `\s`, `\p{L}`, `\p{N}` and `(?i:...)` mean what they mean to the Oniguruma engine the Hugging
// Face tokenizers were written for, with the characters ICU's tables (Unicode 15.0 on Debian 12)
// assigned after PCRE2's own (Unicode 14) added to each class; the parity tests against Hugging Face's
// own implementation (tests/test_tokenizer_parity.cpp) check that on real vocabularies.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata {

// GPT-2's pre-tokenizer pattern: the ByteLevel pre-tokenizer's with use_regex = true.
inline constexpr std::string_view kGpt2PretokenizerPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// LLaMA 3's (tiktoken's cl100k pattern), which SmolLM and others share.
inline constexpr std::string_view kLlama3PretokenizerPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2's: LLaMA 3's with single digits.
inline constexpr std::string_view kQwen2PretokenizerPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The Unicode versions of the tables the tokenizers read at run time ("ICU 15.0, PCRE2 14.0"): a
// system upgrade may change them, and with them the ids of a text.
std::string unicode_tables_version();

class PretokenizerRegex {
 public:
  // Throws TokenizerError naming `where` (the file and field) when PCRE2 refuses the pattern.
  PretokenizerRegex(std::string_view pattern, const std::string& where);
  const std::string& pattern() const noexcept { return pattern_; }
  ~PretokenizerRegex();
  PretokenizerRegex(const PretokenizerRegex&) = delete;
  PretokenizerRegex& operator=(const PretokenizerRegex&) = delete;

  // Splits `text` (valid UTF-8, already checked) as the "Isolated" split behaviour does: every match
  // is a piece, and so is every stretch between matches.
  class Matcher {
   public:
    explicit Matcher(const PretokenizerRegex& regex);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    // Appends the pieces as [begin, end) offsets plus `base`.
    void isolate(std::string_view text, std::size_t base, std::vector<std::pair<std::size_t, std::size_t>>& pieces);
    // Appends every non-empty match of `text`, left to right, as [begin, end) byte offsets; an
    // empty match splits nothing, and the search goes on from the next character.
    void find(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& matches);

   private:
    const PretokenizerRegex& regex_;
    struct MatchData;
    std::unique_ptr<MatchData> data_;
  };

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string pattern_;
};

}  // namespace strata
