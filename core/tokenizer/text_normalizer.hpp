#pragma once
// A tokenizer.json's normalizer: what each stretch of text between added tokens becomes before the
// pre-tokenizer splits it (Hugging Face's normalizers). Implemented: the Unicode forms NFC, NFD,
// NFKC and NFKD, Lowercase, Replace (a literal string or a regex, every occurrence), Prepend (before
// a non-empty stretch), Strip (White_Space at either end), and Sequences of them, nested or empty (a
// Sequence of none changes nothing). Anything else (BertNormalizer, Precompiled, StripAccents) is
// refused by name.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/tokenizer/pretokenizer_regex.hpp"
#include "core/tokenizer/unicode_text.hpp"

namespace strata {

class TextNormalizer {
 public:
  TextNormalizer() = default;  // none: text is left as it is
  // `normalizer` is tokenizer.json's "normalizer" (null: none). Throws TokenizerError naming
  // `where` (the file) and the step it does not implement or finds malformed.
  TextNormalizer(const nlohmann::json& normalizer, const std::string& where);
  ~TextNormalizer();
  TextNormalizer(TextNormalizer&&) noexcept;
  TextNormalizer& operator=(TextNormalizer&&) noexcept;

  // True when no step changes any text.
  bool empty() const noexcept { return steps_.empty(); }
  // Every step is a Unicode normalization form, which reads no further than a character and the
  // marks that follow it (so never across a line end).
  bool only_unicode_forms() const noexcept {
    for (const Step& step : steps_)
      if (step.kind != Kind::unicode_form) return false;
    return true;
  }
  // No step reads across a single space between two ASCII words: the Unicode forms, Lowercase,
  // Prepend, Strip, and Replace of " " or of a string without a space.
  bool keeps_words_apart() const noexcept {
    for (const Step& step : steps_)
      if (step.kind == Kind::replace &&
          (step.regex || (step.pattern != " " && step.pattern.find(' ') != std::string::npos)))
        return false;
    return true;
  }
  // `text` normalized. `scratch` is the caller's buffer (one per thread): the result may live there.
  std::string_view apply(std::string_view text, std::string& scratch) const;

 private:
  enum class Kind { unicode_form, lowercase, replace, prepend, strip };
  struct Step {
    Kind kind;
    UnicodeForm form = UnicodeForm::nfc;
    std::string pattern;                       // replace: the literal string, when no regex
    std::unique_ptr<PretokenizerRegex> regex;  // replace: the pattern, when a regex
    std::string content;                       // replace: the replacement; prepend: the prefix
    bool left = false, right = false;          // strip
  };
  void read(const nlohmann::json& step, const std::string& where, const std::string& field);
  // One step of `text` into `out`; false when it changes nothing (out untouched).
  bool apply_step(const Step& step, std::string_view text, std::string& out) const;

  std::vector<Step> steps_;
};

}  // namespace strata
