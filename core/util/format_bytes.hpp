#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

// "12.5 MiB"
std::string format_bytes(std::uint64_t bytes);
// MiB with two decimals, for tables
std::string format_mib(std::uint64_t bytes);
// A size as a user writes it and parse_bytes reads back: "40MiB", "2GiB", or bytes.
std::string size_text(std::uint64_t bytes);
// "512MiB", "4GiB", "1.5GB", "1024" -> bytes; nullopt when the text is not a size.
std::optional<std::uint64_t> parse_bytes(std::string_view text);

}  // namespace strata
