#include "core/util/path_inside.hpp"

#include <algorithm>

namespace strata {

bool path_is_inside(const std::filesystem::path& path, const std::filesystem::path& directory) {
  std::error_code error;
  const std::filesystem::path inner = std::filesystem::weakly_canonical(path, error);
  if (error) return false;
  const std::filesystem::path outer = std::filesystem::weakly_canonical(directory, error);
  if (error) return false;
  // A trailing separator leaves an empty last element ("a/b/" is a, b, ""): compare without it.
  auto outer_end = outer.end();
  if (outer_end != outer.begin() && std::prev(outer_end)->empty()) --outer_end;
  return std::mismatch(outer.begin(), outer_end, inner.begin(), inner.end()).first == outer_end;
}

}  // namespace strata
