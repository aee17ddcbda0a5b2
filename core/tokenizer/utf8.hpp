#pragma once
// UTF-8 validity, checked once per text so that the regex engine need not check it per match.
#include <cstddef>
#include <optional>
#include <string_view>

namespace strata {

// The byte offset of the first byte that is not part of a valid UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are invalid), or nothing when `text` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace strata
