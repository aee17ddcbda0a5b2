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
  // The rename below would replace a device, pipe or socket with a regular file.
  std::error_code error;
  if (const auto status = std::filesystem::status(path, error);
      std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw std::runtime_error(path.string() + ": is not a regular file; refusing to replace it");
  const std::filesystem::path directory = path.parent_path();
  if (!directory.empty()) std::filesystem::create_directories(directory);
  const std::filesystem::path temporary = path.string() + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", temporary);
  for (const std::string_view bytes : pieces) {
    std::size_t written = 0;
    while (written < bytes.size()) {
      const ssize_t result = ::write(fd, bytes.data() + written, bytes.size() - written);
      if (result < 0) {
        if (errno == EINTR) continue;
        const int saved = errno;
        ::close(fd);
        ::unlink(temporary.c_str());
        errno = saved;
        fail("cannot write", temporary);
      }
      written += static_cast<std::size_t>(result);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temporary.c_str());
    fail("cannot flush", temporary);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    fail("cannot rename into place", path);
  }
  sync_directory(directory);
}

}  // namespace strata
