#include "core/util/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace strata {

namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw std::runtime_error(what + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

void sync_directory(const std::filesystem::path& directory) {
  const int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) fail("cannot open directory", directory);
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  write_file_atomically(path, std::span(&bytes, 1));
}

void write_file_atomically(const std::filesystem::path& path, std::span<const std::string_view> pieces) {
  AtomicFileWriter writer(path);
  for (const std::string_view bytes : pieces) writer.append(bytes);
  writer.commit();
}

AtomicFileWriter::AtomicFileWriter(const std::filesystem::path& path) : path_(path) {
  // The rename at commit would replace a device, pipe or socket with a regular file.
  std::error_code error;
  if (const auto status = std::filesystem::status(path, error);
      std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw std::runtime_error(path.string() + ": is not a regular file; refusing to replace it");
  const std::filesystem::path directory = path.parent_path();
  if (!directory.empty()) std::filesystem::create_directories(directory);
  temporary_ = path.string() + ".tmp-" + std::to_string(::getpid());
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create", temporary_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

void AtomicFileWriter::overwrite(std::size_t offset, std::string_view bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t result =
        ::pwrite(fd_, bytes.data() + written, bytes.size() - written, static_cast<off_t>(offset + written));
    if (result < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", temporary_);
    }
    written += static_cast<std::size_t>(result);
  }
}

void AtomicFileWriter::append(std::string_view bytes) {
  overwrite(size_, bytes);
  size_ += bytes.size();
}

void AtomicFileWriter::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temporary_.c_str());
    fail("cannot flush", temporary_);
  }
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary_.c_str());
    errno = saved;
    fail("cannot rename into place", path_);
  }
  sync_directory(path_.parent_path());
}

}  // namespace strata
