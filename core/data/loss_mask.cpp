#include "core/data/loss_mask.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/data/token_file.hpp"
#include "core/errors/data_error.hpp"

namespace strata {

namespace {

constexpr std::size_t kHeaderBytes = kTokenFileHeaderInts * sizeof(std::int32_t);

std::string header_bytes(std::int64_t count, std::uint64_t token_hash) {
  std::array<std::int32_t, kTokenFileHeaderInts> header{};
  header[0] = kLossMaskMagic;
  header[1] = kLossMaskVersion;
  header[2] = static_cast<std::int32_t>(count);
  header[3] = static_cast<std::int32_t>(static_cast<std::uint32_t>(token_hash));
  header[4] = static_cast<std::int32_t>(static_cast<std::uint32_t>(token_hash >> 32));
  return std::string(reinterpret_cast<const char*>(header.data()), sizeof header);
}

}  // namespace

std::filesystem::path loss_mask_path(const std::filesystem::path& token_file) {
  // Appended, not a replaced extension: train.bin and train.u32, or an --out and a --val-out that
  // differ in their extension alone, must not share a mask.
  return std::filesystem::path(token_file.string() + ".mask");
}

bool is_loss_mask_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  std::ifstream in(path, std::ios::binary);
  std::int32_t magic = 0;
  in.read(reinterpret_cast<char*>(&magic), sizeof magic);
  return in.gcount() == sizeof magic && magic == kLossMaskMagic;
}

LossMaskWriter::LossMaskWriter(const std::filesystem::path& path) : path_(path), file_(path) {
  file_.append(header_bytes(0, 0));
}

void LossMaskWriter::append(std::span<const std::uint8_t> targets) {
  for (const std::uint8_t target : targets) targets_ += target != 0 ? 1 : 0;
  file_.append({reinterpret_cast<const char*>(targets.data()), targets.size()});
  count_ += static_cast<std::int64_t>(targets.size());
}

void LossMaskWriter::commit(std::uint64_t token_hash) {
  file_.overwrite(0, header_bytes(count_, token_hash));
  file_.commit();
}

MappedLossMask map_loss_mask(const std::filesystem::path& mask, const std::filesystem::path& token_file,
                             std::size_t token_count, std::uint64_t token_hash) {
  check_data_file(mask);
  const std::string which = mask.string() + " (the loss mask of " + token_file.string() + ")";
  const int fd = ::open(mask.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(which + ": cannot open for reading (" + std::strerror(errno) + ")");
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    ::close(fd);
    throw DataError(which + ": cannot stat");
  }
  const auto size = static_cast<std::size_t>(status.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    throw DataError(which + ": " + std::to_string(size) + " bytes, shorter than its 1024-byte header");
  }
  void* address = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (address == MAP_FAILED) throw DataError(which + ": cannot map (" + std::strerror(errno) + ")");
  std::shared_ptr<const void> storage(address, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  std::array<std::int32_t, 5> header{};
  std::memcpy(header.data(), address, sizeof header);
  if (header[0] != kLossMaskMagic)
    throw DataError(which + ": not a loss mask (magic " + std::to_string(header[0]) + ", expected " +
                    std::to_string(kLossMaskMagic) + ")");
  if (header[1] != kLossMaskVersion)
    throw DataError(which + ": version " + std::to_string(header[1]) + ", this build reads version " +
                    std::to_string(kLossMaskVersion));
  const auto count = static_cast<std::size_t>(static_cast<std::uint32_t>(header[2]));
  if (size != kHeaderBytes + count)
    throw DataError(which + ": " + std::to_string(size) + " bytes, its header promises " +
                    std::to_string(kHeaderBytes + count) + " (a truncated or extended file)");
  if (count != token_count)
    throw DataError(which + ": " + std::to_string(count) + " positions for " + std::to_string(token_count) +
                    " tokens: it belongs to another token file (write both with `strata prepare`)");
  const std::uint64_t saved_hash = static_cast<std::uint64_t>(static_cast<std::uint32_t>(header[3])) |
                                   static_cast<std::uint64_t>(static_cast<std::uint32_t>(header[4])) << 32;
  if (saved_hash != token_hash)
    throw DataError(which +
                    ": written for other tokens (the token file changed since, or the mask is another's): "
                    "write both again with `strata prepare`");
  const auto* bytes = static_cast<const std::uint8_t*>(address) + kHeaderBytes;
  for (std::size_t i = 0; i < count; ++i)
    if (bytes[i] > 1)
      throw DataError(which + ": byte " + std::to_string(bytes[i]) + " at position " + std::to_string(i) +
                      " (a mask holds 1 for a target and 0 for none)");
  return {std::move(storage), {bytes, count}};
}

}  // namespace strata
