#include "core/manifest/toml_text_guard.hpp"

namespace strata {

namespace {

bool is_ascii(char byte) {
  return static_cast<unsigned char>(byte) < 0x80;
}

bool is_ascii_space(char byte) {
  return byte == ' ' || byte == '\t' || byte == '\r' || byte == '\n';
}

// How many of `quote` start at `at` (TOML's string delimiters: one or three quotes).
std::size_t quotes_at(std::string_view text, std::size_t at, char quote) {
  std::size_t count = 0;
  while (at + count < text.size() && text[at + count] == quote) ++count;
  return count;
}

UnsafeTomlCharacter at_offset(std::string_view text, std::size_t offset, std::string problem) {
  UnsafeTomlCharacter found;
  found.problem = std::move(problem);
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++found.line;
      found.column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {  // not a UTF-8 continuation byte
      ++found.column;
    }
  }
  return found;
}

}  // namespace

std::optional<UnsafeTomlCharacter> find_unsafe_toml_character(std::string_view text) {
  enum class Context { plain, comment, basic, literal, multi_line_basic, multi_line_literal };
  Context context = Context::plain;
  const std::size_t start = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // a byte order mark, which toml++ skips
  // A quote opens a string only where a key or value starts. Inside a malformed bare word (2x"é)
  // toml++ reads on to the next whitespace, testing every character, so the quote opens nothing.
  auto opens_string = [&](std::size_t at) {
    return at == start || std::string_view(" \t\r\n=[{,.").find(text[at - 1]) != std::string_view::npos;
  };
  std::size_t i = start;
  std::size_t dots = 0;  // in the key or table name being read
  while (i < text.size()) {
    const char byte = text[i];
    switch (context) {
      case Context::plain:
        if (!is_ascii(byte))
          return at_offset(text, i, "a non-ASCII character outside a string or comment (TOML allows them only there)");
        if (byte == '.' && ++dots >= kMaxTomlKeyParts)
          return at_offset(text, i,
                           "a dotted key or table name of more than " + std::to_string(kMaxTomlKeyParts) +
                               " parts (a manifest's keys have at most 3)");
        if (std::string_view("=,{}[]\n").find(byte) != std::string_view::npos) dots = 0;
        if (byte == '#') {
          context = Context::comment;
        } else if ((byte == '"' || byte == '\'') && opens_string(i)) {
          const std::size_t count = quotes_at(text, i, byte);
          if (count >= 3) {
            context = byte == '"' ? Context::multi_line_basic : Context::multi_line_literal;
            i += 3;
            continue;
          }
          if (count == 2) {  // an empty string
            i += 2;
            continue;
          }
          context = byte == '"' ? Context::basic : Context::literal;
        }
        ++i;
        break;
      case Context::comment:
        if (byte == '\n') context = Context::plain;
        ++i;
        break;
      case Context::basic:
        if (byte == '\\') {
          i += 2;  // the escaped character is never the closing quote
          continue;
        }
        if (byte == '"' || byte == '\n') context = Context::plain;  // toml++ refuses the line break itself
        ++i;
        break;
      case Context::literal:
        if (byte == '\'' || byte == '\n') context = Context::plain;
        ++i;
        break;
      case Context::multi_line_basic:
        if (byte == '\\') {
          std::size_t next = i + 1;
          if (next < text.size() && !is_ascii(text[next]))
            return at_offset(
                text, next,
                "a non-ASCII character right after a backslash in a multi-line string (write it as a \\u escape)");
          if (next < text.size() && is_ascii_space(text[next])) {  // a line-ending backslash
            while (next < text.size() && is_ascii_space(text[next])) ++next;
            if (next < text.size() && !is_ascii(text[next]))
              return at_offset(text, next,
                               "a non-ASCII character first after a line-ending backslash in a multi-line string "
                               "(write it as a \\u escape)");
            i = next;
            continue;
          }
          i += 2;
          continue;
        }
        if (byte == '"' && quotes_at(text, i, '"') >= 3) {  // up to two more quotes belong to the string
          i += quotes_at(text, i, '"');
          context = Context::plain;
          continue;
        }
        ++i;
        break;
      case Context::multi_line_literal:
        if (byte == '\'' && quotes_at(text, i, '\'') >= 3) {
          i += quotes_at(text, i, '\'');
          context = Context::plain;
          continue;
        }
        ++i;
        break;
    }
  }
  return std::nullopt;
}

}  // namespace strata
