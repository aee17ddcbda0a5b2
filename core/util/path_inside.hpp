#pragma once
// Whether one path lies inside a directory, compared after both are made absolute and normal
// (symlinks resolved as far as they exist): "runs/a/../a/ck/step_3" is inside "runs/a/ck".
#include <filesystem>

namespace strata {

// True when `path` is `directory` itself or lies below it; false when either cannot be resolved.
bool path_is_inside(const std::filesystem::path& path, const std::filesystem::path& directory);

}  // namespace strata
