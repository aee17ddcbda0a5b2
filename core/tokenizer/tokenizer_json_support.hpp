#pragma once
// What the readers of tokenizer.json's parts share: a step's type, a flag, and walking UTF-8 text
// that has been checked once (utf8.hpp).
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/tokenizer/tokenizer.hpp"

namespace strata::tokenizer_json {

// A step's "type", or "?" when it has none.
inline std::string type_of(const nlohmann::json& node) {
  return node.is_object() && node.contains("type") && node["type"].is_string() ? node["type"].get<std::string>()
                                                                               : std::string("?");
}

// A true/false field, `fallback` when absent or null; `field` names the step in the error.
inline bool flag(const nlohmann::json& node, const char* key, bool fallback, const std::string& field) {
  if (!node.is_object() || !node.contains(key) || node[key].is_null()) return fallback;
  if (!node[key].is_boolean()) throw TokenizerError(field + ": \"" + key + "\" is not true or false");
  return node[key].get<bool>();
}

// The length of the UTF-8 character whose first byte is `lead`, in valid UTF-8.
inline std::size_t character_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
}

// The character of `length` bytes at `i`.
inline char32_t character_at(std::string_view text, std::size_t i, std::size_t length) {
  const auto byte = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(text[i + k])); };
  switch (length) {
    case 1: return byte(0);
    case 2: return (byte(0) & 0x1Fu) << 6 | (byte(1) & 0x3Fu);
    case 3: return (byte(0) & 0x0Fu) << 12 | (byte(1) & 0x3Fu) << 6 | (byte(2) & 0x3Fu);
    default: return (byte(0) & 0x07u) << 18 | (byte(1) & 0x3Fu) << 12 | (byte(2) & 0x3Fu) << 6 | (byte(3) & 0x3Fu);
  }
}

}  // namespace strata::tokenizer_json
