#include "core/util/path_inside.hpp"

#include <algorithm>

namespace strata {

std::filesystem::path resolved_path(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::path result = std::filesystem::weakly_canonical(path, error);
  return error ? std::filesystem::absolute(path, error) : result;
}

std::optional<std::filesystem::path> path_within(const std::filesystem::path& inner,
                                                 const std::filesystem::path& outer) {
  std::error_code error;
  if (std::filesystem::equivalent(inner, outer, error) && !error) return std::filesystem::path(".");
  const std::filesystem::path a = resolved_path(inner), b = resolved_path(outer);
  // A trailing separator leaves an empty last element ("a/b/" is a, b, ""): compare without it.
  auto b_end = b.end();
  if (b_end != b.begin() && std::prev(b_end)->empty()) --b_end;
  auto [end_of_b, rest] = std::mismatch(b.begin(), b_end, a.begin(), a.end());
  if (end_of_b != b_end) return std::nullopt;
  std::filesystem::path relative;
  for (; rest != a.end(); ++rest) relative /= *rest;
  return relative.empty() ? std::filesystem::path(".") : relative;
}

}  // namespace strata
