#include "core/data/token_sequence.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <span>
#include <string>

#include "core/data/loss_mask.hpp"
#include "core/data/token_file.hpp"
#include "core/errors/data_error.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace strata {

TokenSequence::TokenSequence(std::vector<std::uint32_t> tokens) {
  auto owned = std::make_shared<const std::vector<std::uint32_t>>(std::move(tokens));
  data_ = reinterpret_cast<const unsigned char*>(owned->data());
  size_ = owned->size();
  storage_ = std::move(owned);
}

TokenSequence TokenSequence::map_token_file(const std::filesystem::path& path, int vocab) {
  check_data_file(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(path.string() + ": cannot open for reading (" + std::strerror(errno) + ")");
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    ::close(fd);
    throw DataError(path.string() + ": cannot stat");
  }
  const auto file_size = static_cast<std::size_t>(status.st_size);
  void* address = file_size == 0 ? MAP_FAILED : ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (address == MAP_FAILED) {
    if (file_size == 0)
      throw DataError(path.string() + ": truncated token file: 0 bytes, shorter than the 1024-byte header");
    throw DataError(path.string() + ": cannot map (" + std::strerror(errno) + ")");
  }
  std::shared_ptr<const void> mapping(address,
                                      [file_size](const void* p) { ::munmap(const_cast<void*>(p), file_size); });
  const std::span<const char> bytes(static_cast<const char*>(address), file_size);
  const TokenFileLayout layout = token_file_layout(bytes, file_size, path);
  TokenSequence sequence;
  sequence.storage_ = std::move(mapping);
  sequence.data_ = static_cast<const unsigned char*>(address) + layout.first_token;
  sequence.size_ = layout.count;
  sequence.width_ = layout.width;
  sequence.recorded_hash_ = layout.token_hash;
  // One pass over every id, read ahead in order, each 64 MiB dropped from this process's pages once
  // checked (the page cache keeps them while memory allows): checking a corpus larger than memory
  // costs no resident memory. Batches then read their windows' pages as they need them.
  ::madvise(address, file_size, MADV_SEQUENTIAL);
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  constexpr std::size_t kChunkBytes = std::size_t{64} << 20;
  const std::size_t chunk_tokens = kChunkBytes / sequence.width_;
  for (std::size_t first = 0; first < sequence.size_; first += chunk_tokens) {
    const std::size_t last = std::min(sequence.size_, first + chunk_tokens);
    for (std::size_t i = first; i < last; ++i)
      if (static_cast<std::int64_t>(sequence[i]) >= vocab)
        throw DataError(path.string() + ": token " + std::to_string(sequence[i]) + " at position " + std::to_string(i) +
                        " is outside the model's vocabulary (model.vocab = " + std::to_string(vocab) + ")");
    const auto begin = reinterpret_cast<std::uintptr_t>(sequence.data_ + first * sequence.width_);
    const auto end = reinterpret_cast<std::uintptr_t>(sequence.data_ + last * sequence.width_);
    const std::uintptr_t aligned = (begin + page - 1) / page * page;
    if (end > aligned + page) ::madvise(reinterpret_cast<void*>(aligned), (end - aligned) / page * page, MADV_DONTNEED);
  }
  ::madvise(address, file_size, MADV_RANDOM);
  const std::filesystem::path mask = loss_mask_path(path);
  std::error_code error;
  if (std::filesystem::exists(mask, error) && mask != path) {
    MappedLossMask mapped = map_loss_mask(mask, path, sequence.size_, sequence.token_hash());
    sequence.mask_storage_ = std::move(mapped.storage);
    sequence.mask_ = mapped.targets.data();
  }
  return sequence;
}

std::uint64_t TokenSequence::token_hash() const noexcept {
  return XXH3_64bits(data_, size_ * width_);
}

std::uint64_t TokenSequence::mask_hash() const noexcept {
  return mask_ != nullptr ? XXH3_64bits(mask_, size_) : 0;
}

TokenSequence TokenSequence::slice(std::size_t begin, std::size_t end) const {
  TokenSequence part = *this;
  part.data_ = data_ + begin * width_;
  part.size_ = end - begin;
  if (mask_ != nullptr) part.mask_ = mask_ + begin;
  return part;
}

std::vector<std::uint32_t> TokenSequence::to_vector() const {
  std::vector<std::uint32_t> tokens(size_);
  for (std::size_t i = 0; i < size_; ++i) tokens[i] = (*this)[i];
  return tokens;
}

}  // namespace strata
