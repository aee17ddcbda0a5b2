#pragma once
// Whether one path lies inside a directory, compared after both are made absolute and normal
// (symlinks resolved as far as they exist): "runs/a/../a/ck/step_3" is inside "runs/a/ck".
#include <filesystem>
#include <optional>

namespace strata {

// The path made absolute and normal, symlinks resolved as far as they exist.
std::filesystem::path resolved_path(const std::filesystem::path& path);

// `inner` relative to `outer` when it lies inside it, or "." when it is it (the same file under
// another name, a hard link, counts); none otherwise.
std::optional<std::filesystem::path> path_within(const std::filesystem::path& inner,
                                                 const std::filesystem::path& outer);

// True when `path` is `directory` itself or lies below it.
inline bool path_is_inside(const std::filesystem::path& path, const std::filesystem::path& directory) {
  return path_within(path, directory).has_value();
}

}  // namespace strata
