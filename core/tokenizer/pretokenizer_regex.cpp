#include "core/tokenizer/pretokenizer_regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <stdexcept>

#include "core/tokenizer/tokenizer.hpp"
#include "core/tokenizer/unicode_text.hpp"

namespace strata {

namespace {

// Oniguruma's \s, the Unicode White_Space set, spelled out: PCRE2's \s in UCP mode also takes
// U+180E (Mongolian vowel separator, a space in Unicode 6.2 and before), Oniguruma's does not.
constexpr std::string_view kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// Oniguruma's Unicode \w: letters and other alphabetic characters, marks, decimal digits,
// connector punctuation and the joiners.
constexpr std::string_view kWordSet = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";

// An ICU set as a class: its body inside a class, a class of its own outside one; an empty set
// matches nothing.
std::string spelled_class(std::string_view icu_set, bool negated, bool in_class, const std::string& where) {
  std::string body;
  try {
    body = class_body(icu_set, negated);
  } catch (const std::invalid_argument& error) {
    throw TokenizerError(where + ": the pre-tokenizer pattern names " + error.what());
  }
  if (in_class) return body;
  return body.empty() ? std::string("(?!)") : "[" + body + "]";
}

// The Unicode version of PCRE2's own tables, major.minor ("14.0" in PCRE2 10.42).
std::string pcre2_unicode_version() {
  char version[32] = {};
  if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version) <= 0) return "0.0";
  std::string text(version);
  if (const auto second_dot = text.find('.', text.find('.') + 1); second_dot != std::string::npos)
    text.resize(second_dot);  // ICU's Age values are major.minor
  return text;
}

// The general categories whose characters only grow from one Unicode version to the next (every
// category but unassigned and the "other" group holding it).
bool is_growing_category(const std::string& name) {
  static constexpr std::string_view kCategories[] = {
      "L",  "Lu", "Ll", "Lt", "Lm", "Lo", "M",  "Mn", "Mc", "Me", "N", "Nd", "Nl", "No", "P",  "Pc", "Pd",
      "Ps", "Pe", "Pi", "Pf", "Po", "S",  "Sm", "Sc", "Sk", "So", "Z", "Zs", "Zl", "Zp", "Cc", "Cf", "Co"};
  return std::find(std::begin(kCategories), std::end(kCategories), name) != std::end(kCategories);
}

// \p{name}, not negated: PCRE2's own class (fast to match) and the characters ICU's newer tables
// add to it (the ones assigned after PCRE2's version); any other property spelled out from ICU.
std::string growing_class(const std::string& name, bool in_class, const std::string& where) {
  static const std::string older = pcre2_unicode_version();
  const std::string added = spelled_class("[\\p{" + name + "}-[\\p{Age=" + older + "}]]", false, true, where);
  const std::string own = "\\p{" + name + "}";
  return in_class ? own + added : "[" + own + added + "]";
}

// An empty match splits nothing: the search goes on from the next character.
std::size_t next_character(std::string_view text, std::size_t at) {
  ++at;
  while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
  return at;
}

[[noreturn]] void fail_at(int error, std::size_t at) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(error, message, sizeof message);
  throw TokenizerError("the pre-tokenizer pattern failed at byte " + std::to_string(at) + ": " +
                       reinterpret_cast<const char*>(message));
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// `pattern` with its character class escapes brought to ICU's tables (unicode_text.hpp), so that
// \p{L} holds the letters of the Unicode version the normalizers use rather than only PCRE2's
// (Unicode 14 in PCRE2 10.42): a general category (\p{..}, \pX, \d) as PCRE2's class plus ICU's
// characters assigned since (growing_class), any other (\P{..}, other properties, \w, \D, \W)
// spelled out from ICU; \s and \S as Oniguruma's White_Space; Oniguruma's \uHHHH as PCRE2's \x{HHHH}.
std::string with_icu_classes(std::string_view pattern, const std::string& where) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (escaped == 'S') {
        out += in_class ? spelled_class("\\p{White_Space}", true, true, where) : "[^" + std::string(kWhiteSpace) + "]";
      } else if (escaped == 'd') {
        out += growing_class("Nd", in_class, where);
      } else if (escaped == 'D') {
        out += spelled_class("\\p{Nd}", true, in_class, where);
      } else if (escaped == 'w' || escaped == 'W') {
        out += spelled_class(kWordSet, escaped == 'W', in_class, where);
      } else if (escaped == 'p' || escaped == 'P') {
        std::string name;
        if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
          const auto close = pattern.find('}', i + 2);
          if (close == std::string_view::npos)
            throw TokenizerError(where + ": the pre-tokenizer pattern has \\" + std::string(1, escaped) +
                                 "{ without its }");
          name = std::string(pattern.substr(i + 2, close - i - 2));
          i = close;
        } else if (i + 1 < pattern.size()) {
          name = std::string(1, pattern[++i]);
        }
        bool negated = escaped == 'P';
        if (!name.empty() && name[0] == '^') negated = !negated, name.erase(0, 1);
        if (!negated && is_growing_category(name))
          out += growing_class(name, in_class, where);
        else
          out += spelled_class("\\p{" + name + "}", negated, in_class, where);
      } else if (escaped == 'u' && i + 4 < pattern.size() && is_hex(pattern[i + 1]) && is_hex(pattern[i + 2]) &&
                 is_hex(pattern[i + 3]) && is_hex(pattern[i + 4])) {
        out += "\\x{" + std::string(pattern.substr(i + 1, 4)) + "}";
        i += 4;
      } else {
        out += {c, escaped};
      }
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
  const std::string compiled = with_icu_classes(pattern, where);
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(), PCRE2_UTF | PCRE2_UCP,
                              &error, &error_offset, nullptr);
  if (code_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw TokenizerError(
        where + ": the pre-tokenizer pattern does not compile: " + reinterpret_cast<const char*>(message) +
        " (at offset " + std::to_string(error_offset) + " of it with its classes spelled out from ICU's tables)");
  }
  // JIT is several times faster; where the machine refuses it (no executable memory), the
  // interpreter gives the same matches.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

PretokenizerRegex::~PretokenizerRegex() = default;

std::string unicode_tables_version() {
  return "ICU " + icu_unicode_version() + ", PCRE2 " + pcre2_unicode_version();
}

PretokenizerRegex::Matcher::Matcher(const PretokenizerRegex& regex)
    : regex_(regex), data_(std::make_unique<MatchData>()) {
  data_->data = pcre2_match_data_create_from_pattern(regex_.code_->code, nullptr);
  if (data_->data == nullptr) throw std::bad_alloc();
}

PretokenizerRegex::Matcher::~Matcher() = default;

// Calls on_match(start, end) for every non-empty match of `text`, left to right; an empty match
// splits nothing, and the search goes on from the next character. A template, so that the caller's
// work per match is inlined: isolate() runs on every byte of a corpus.
template <typename OnMatch>
void for_each_match(pcre2_code* code, pcre2_match_data* data, std::string_view text, OnMatch&& on_match) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t search_from = 0;
  while (search_from < text.size()) {
    // The text was checked once for UTF-8; checking it again per match would cost O(n) each.
    const int found = pcre2_match(code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (found == PCRE2_ERROR_NOMATCH) break;
    if (found < 0) fail_at(found, search_from);
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const std::size_t start = ovector[0];
    const std::size_t end = ovector[1];
    if (end == start) {
      search_from = next_character(text, start);
      continue;
    }
    on_match(start, end);
    search_from = end;
  }
}

void PretokenizerRegex::Matcher::isolate(std::string_view text, std::size_t base,
                                         std::vector<std::pair<std::size_t, std::size_t>>& pieces) {
  std::size_t piece_start = 0;
  for_each_match(regex_.code_->code, data_->data, text, [&](std::size_t start, std::size_t end) {
    if (start > piece_start) pieces.emplace_back(base + piece_start, base + start);  // the stretch before
    pieces.emplace_back(base + start, base + end);
    piece_start = end;
  });
  if (piece_start < text.size()) pieces.emplace_back(base + piece_start, base + text.size());
}

void PretokenizerRegex::Matcher::find(std::string_view text,
                                      std::vector<std::pair<std::size_t, std::size_t>>& matches) {
  for_each_match(regex_.code_->code, data_->data, text,
                 [&](std::size_t start, std::size_t end) { matches.emplace_back(start, end); });
}

}  // namespace strata
