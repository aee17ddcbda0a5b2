#pragma once
// A run's tokens, wherever they are: a token file mapped read-only (nothing copied, so a corpus
// larger than memory trains, its pages read as the batches touch them), or tokens in memory (text
// read as bytes). A slice shares its parent's storage: the validation split costs nothing. A token
// file's loss mask (core/data/loss_mask.hpp), when one lies beside it, is mapped with it and sliced
// with it.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace strata {

class TokenSequence {
 public:
  TokenSequence() = default;
  explicit TokenSequence(std::vector<std::uint32_t> tokens);
  // Maps an llm.c token file (token_file.hpp) and checks its header, its size and every id
  // < vocab, and its loss mask when one lies beside it; throws DataError naming the file.
  static TokenSequence map_token_file(const std::filesystem::path& path, int vocab);

  std::size_t size() const noexcept { return size_; }
  std::uint32_t operator[](std::size_t i) const noexcept {
    if (width_ == sizeof(std::uint16_t)) {
      std::uint16_t id;
      std::memcpy(&id, data_ + i * sizeof id, sizeof id);
      return id;
    }
    std::uint32_t id;
    std::memcpy(&id, data_ + i * sizeof id, sizeof id);
    return id;
  }
  // Whether token i is a target: its mask's byte, or true without a mask.
  bool is_target(std::size_t i) const noexcept { return mask_ == nullptr || mask_[i] != 0; }
  bool has_loss_mask() const noexcept { return mask_ != nullptr; }
  // XXH3-64 of the token bytes as stored (what a loss mask is written for), and the hash the token
  // file's header recorded when it was written (0: none recorded; a slice keeps its file's).
  std::uint64_t token_hash() const noexcept;
  std::uint64_t recorded_hash() const noexcept { return recorded_hash_; }
  // XXH3-64 of this sequence's loss-mask bytes, every one of them; 0 without a mask.
  std::uint64_t mask_hash() const noexcept;
  // Tokens [begin, end), sharing this sequence's storage.
  TokenSequence slice(std::size_t begin, std::size_t end) const;
  std::vector<std::uint32_t> to_vector() const;

 private:
  std::shared_ptr<const void> storage_;  // the mapping or the vector the tokens live in
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t width_ = sizeof(std::uint32_t);
  std::shared_ptr<const void> mask_storage_;  // the loss mask's mapping, when there is one
  const std::uint8_t* mask_ = nullptr;
  std::uint64_t recorded_hash_ = 0;
};

}  // namespace strata
