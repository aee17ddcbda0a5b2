#pragma once
// What a checkpoint records of its training data besides the path, so that a resume notices data
// changed in place: the size and an XXH3-64 of the content (the whole file up to 64 MiB; above
// that, 65 evenly spaced 1 MiB samples from the first MiB on, and the last MiB: enough to catch a
// swapped or regenerated file, and most edits, without reading a 100 GB corpus).
#include <filesystem>
#include <string>

namespace strata {

// "size:<bytes>,xxh3:<16 hex digits>"; throws DataError when the file cannot be read.
std::string data_fingerprint(const std::filesystem::path& path);

}  // namespace strata
