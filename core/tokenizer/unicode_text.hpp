#pragma once
// What tokenizer.json's steps need of Unicode, from the system's ICU (Debian 12: ICU 72, Unicode
// 15.0): the normalization forms, lower case, White_Space, and a set's characters as a PCRE2 class
// (what pretokenizer_regex adds to PCRE2's older tables).
#include <string>
#include <string_view>

namespace strata {

enum class UnicodeForm { nfc, nfd, nfkc, nfkd };

// The Unicode version of ICU's tables, major.minor ("15.0").
std::string icu_unicode_version();

// When `text` (valid UTF-8) is not already in `form`, sets `out` to it and returns true; returns
// false, leaving `out` alone, when it is (ASCII always is, and is answered without ICU).
bool to_unicode_form(std::string_view text, UnicodeForm form, std::string& out);

// Unicode's default lower case of `text` (final sigma by context, no locale), as Rust's
// str::to_lowercase and JavaScript's toLowerCase give it; returns false when nothing changes.
bool to_lower_case(std::string_view text, std::string& out);

// Whether the character is White_Space (Rust's char::is_whitespace, Oniguruma's \s).
bool is_white_space(char32_t character);

// The characters of an ICU set ("\\p{L}", "\\p{Han}", "[\\p{Alphabetic}\\p{M}]") as the body of a PCRE2
// character class ("\\x{41}-\\x{5A}\\x{61}-\\x{7A}..."), its complement when `negated`; surrogates are
// never in it. Empty when the set has no character. Throws std::invalid_argument when ICU cannot
// read the set (an unknown property name).
std::string class_body(std::string_view icu_set, bool negated);

}  // namespace strata
