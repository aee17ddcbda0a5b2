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
// The same for a file written as it is made (a token file larger than memory): bytes go to a
// temporary file beside `path`, and commit() moves it into place. Destroyed uncommitted (an error,
// a stop), it removes the temporary file and leaves `path` as it was.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::filesystem::path& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void append(std::string_view bytes);
  // Overwrites bytes already appended (a header whose count is known at the end).
  void overwrite(std::size_t offset, std::string_view bytes);
  std::size_t size() const noexcept { return size_; }
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temporary_;
  int fd_ = -1;
  std::size_t size_ = 0;
};

// fsync a directory so a rename inside it is durable.
void sync_directory(const std::filesystem::path& directory);

}  // namespace strata
