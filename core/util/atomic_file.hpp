#pragma once
// Write-to-temp, fsync, rename, fsync the directory: a reader sees the old file or the new one,
// never half of either, even if the process dies mid-write. A path that exists and is not a
// regular file (a device, a pipe) is refused, never replaced.
#include <filesystem>
#include <span>
#include <string_view>

namespace strata {

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);
// The same for a file given in pieces, written in turn (no copy joins them).
void write_file_atomically(const std::filesystem::path& path, std::span<const std::string_view> pieces);
// fsync a directory so a rename inside it is durable.
void sync_directory(const std::filesystem::path& directory);

}  // namespace strata
