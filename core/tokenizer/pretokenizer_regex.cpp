#include "core/tokenizer/pretokenizer_regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/tokenizer/tokenizer.hpp"

namespace strata {

namespace {

// Oniguruma's \s, the Unicode White_Space set, spelled out: PCRE2's \s in UCP mode also takes
// U+180E (Mongolian vowel separator, a space in Unicode 6.2 and before), Oniguruma's does not.
constexpr std::string_view kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// `pattern` with every \s (and \S outside a character class) replaced by kWhiteSpace.
std::string with_oniguruma_white_space(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's')
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      else if (escaped == 'S' && !in_class)
        out += "[^" + std::string(kWhiteSpace) + "]";
      else
        out += {c, escaped};
      continue;
    }
    if (in_class && pattern.compare(i, 2, "[:") == 0) {  // a POSIX class: [:alpha:] inside [...]
      const auto end = pattern.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    out += c;
    if (c == '[' && !in_class) {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a leading ] is literal
    } else if (c == ']' && in_class) {
      in_class = false;
    }
  }
  return out;
}

}  // namespace

struct PretokenizerRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

struct PretokenizerRegex::Matcher::MatchData {
  pcre2_match_data* data = nullptr;
  ~MatchData() { pcre2_match_data_free(data); }
};

PretokenizerRegex::PretokenizerRegex(std::string_view pattern, const std::string& where)
    : code_(std::make_unique<Code>()), pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  const std::string compiled = with_oniguruma_white_space(pattern);
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), PCRE2_UTF | PCRE2_UCP,
                              &error, &error_offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw TokenizerError(
        where + ": the pre-tokenizer pattern does not compile: " + reinterpret_cast<const char*>(message) +
        " (at offset " + std::to_string(error_offset) + " of it with \\s spelled out as Oniguruma's set)");
  }
  // JIT is several times faster; where the machine refuses it (no executable memory), the
  // interpreter gives the same matches.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

PretokenizerRegex::~PretokenizerRegex() = default;

PretokenizerRegex::Matcher::Matcher(const PretokenizerRegex& regex)
    : regex_(regex), data_(std::make_unique<MatchData>()) {
  data_->data = pcre2_match_data_create_from_pattern(regex_.code_->code, nullptr);
  if (data_->data == nullptr) throw std::bad_alloc();
}

PretokenizerRegex::Matcher::~Matcher() = default;

void PretokenizerRegex::Matcher::split(std::string_view text, std::vector<std::size_t>& piece_ends) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t piece_start = 0;
  std::size_t search_from = 0;
  while (search_from < text.size()) {
    // The text was checked once for UTF-8; checking it again per match would cost O(n) each.
    const int found =
        pcre2_match(regex_.code_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, data_->data, nullptr);
    if (found == PCRE2_ERROR_NOMATCH) break;
    if (found < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(found, message, sizeof message);
      throw TokenizerError("the pre-tokenizer pattern failed at byte " + std::to_string(search_from) + ": " +
                           reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data_->data);
    const std::size_t start = ovector[0];
    const std::size_t end = ovector[1];
    if (end == start) {
      // An empty match splits nothing: search again from the next character.
      search_from = start + 1;
      while (search_from < text.size() && (static_cast<unsigned char>(text[search_from]) & 0xC0) == 0x80) ++search_from;
      continue;
    }
    if (start > piece_start) piece_ends.push_back(start);  // the stretch before the match
    piece_ends.push_back(end);
    piece_start = search_from = end;
  }
  if (piece_start < text.size()) piece_ends.push_back(text.size());
}

}  // namespace strata
