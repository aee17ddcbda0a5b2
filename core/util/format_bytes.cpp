#include "core/util/format_bytes.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace strata {

std::string format_bytes(std::uint64_t bytes) {
  constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string format_mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

std::string size_text(std::uint64_t bytes) {
  if (bytes % (std::uint64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes % (std::uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes);
}

std::optional<std::uint64_t> parse_bytes(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  std::size_t number_end = 0;
  while (number_end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[number_end])) || text[number_end] == '.'))
    ++number_end;
  if (number_end == 0) return std::nullopt;
  double number = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + number_end, number);
  if (error != std::errc() || end != text.data() + number_end) return std::nullopt;
  std::string_view unit = text.substr(number_end);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  constexpr std::array<std::pair<std::string_view, double>, 11> kUnits = {{{"", 1.0},
                                                                           {"B", 1.0},
                                                                           {"KiB", 1024.0},
                                                                           {"MiB", 1024.0 * 1024.0},
                                                                           {"GiB", 1024.0 * 1024.0 * 1024.0},
                                                                           {"TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0},
                                                                           {"KB", 1e3},
                                                                           {"kB", 1e3},
                                                                           {"MB", 1e6},
                                                                           {"GB", 1e9},
                                                                           {"TB", 1e12}}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      const double bytes = std::round(number * scale);
      if (bytes < 0 || bytes > 1.8e19) return std::nullopt;
      return static_cast<std::uint64_t>(bytes);
    }
  }
  return std::nullopt;
}

}  // namespace strata
