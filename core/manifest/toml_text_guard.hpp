#pragma once
// toml++ 3.3.0, the version Strata builds against, reaches __builtin_unreachable (undefined
// behaviour) when it tests certain non-ASCII code points for whitespace (U+00A1..U+0499, among
// others: Latin-1, Greek, Cyrillic). It tests characters for whitespace outside strings and
// comments, where TOML allows no non-ASCII character anyway, and inside a multi-line basic string
// right after a backslash, or after a line-ending backslash on the first character that is not
// whitespace. The manifest loader finds those characters first and refuses the text with a clear
// message, so toml++ never sees them (found by fuzz/fuzz_manifest.cpp). It refuses keys nested too
// deeply for toml++'s recursion the same way.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

struct UnsafeTomlCharacter {
  std::size_t line = 1;    // from 1
  std::size_t column = 1;  // from 1, in characters (UTF-8 sequences), as toml++ counts
  std::string problem;     // what is wrong there, for the message
};

// toml++ nests a table per part of a dotted key or table name, recursively: tens of thousands of
// parts overflow the stack. Real manifests use three.
inline constexpr std::size_t kMaxTomlKeyParts = 64;

// The first character of `text` that toml++ would test for whitespace while it is not ASCII, or
// the dot that makes a key longer than kMaxTomlKeyParts parts.
std::optional<UnsafeTomlCharacter> find_unsafe_toml_character(std::string_view text);

}  // namespace strata
