#pragma once
// A loss mask: which positions of a token file are targets. Chat data trains on the assistant's
// turns and not on the prompts that lead to them; a completion dataset on the completions. The mask
// lives beside its token file, its name with `.mask` appended (train.bin: train.bin.mask), and is
// read with it wherever the token file is read (training, validation,
// `strata eval --data`). Without one every position is a target, as ever.
//
// Format (little-endian), after llm.c's token files: a header of 256 int32 — magic 20261208,
// version 1, the token count, then the XXH3-64 of the token file's token bytes as two int32 (low
// word first), then zeros — followed by one byte per token, 1 (a target) or 0. A mask is refused
// (DataError naming both files) when its size, count or hash does not match its token file, or
// when a byte is neither 0 nor 1: a mask of other tokens would train on the wrong positions.
//
// Position i of the mask says whether token i is a target: the window whose inputs are tokens
// [s, s + T) predicts tokens [s + 1, s + T + 1), and target t is masked out (-1: no loss, no
// gradient) where mask[s + t + 1] is 0.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "core/util/atomic_file.hpp"

namespace strata {

inline constexpr std::int32_t kLossMaskMagic = 20261208;
inline constexpr std::int32_t kLossMaskVersion = 1;

std::filesystem::path loss_mask_path(const std::filesystem::path& token_file);
// Whether `path` is a regular file that starts with a loss mask's magic (one Strata wrote).
bool is_loss_mask_file(const std::filesystem::path& path);

// Written as the tokens come, atomically: nothing is at `path` until commit().
class LossMaskWriter {
 public:
  explicit LossMaskWriter(const std::filesystem::path& path);
  void append(std::span<const std::uint8_t> targets);  // 1: a target, 0: not
  std::int64_t count() const noexcept { return count_; }
  std::int64_t targets() const noexcept { return targets_; }
  // `token_hash`: TokenFileWriter::token_hash() of the file the mask belongs to.
  void commit(std::uint64_t token_hash);

 private:
  std::filesystem::path path_;
  AtomicFileWriter file_;
  std::int64_t count_ = 0;
  std::int64_t targets_ = 0;
};

// The mask's bytes, checked against its token file's count and token-byte hash. The span points
// into `storage`, a read-only mapping of the file.
struct MappedLossMask {
  std::shared_ptr<const void> storage;
  std::span<const std::uint8_t> targets;
};
MappedLossMask map_loss_mask(const std::filesystem::path& mask, const std::filesystem::path& token_file,
                             std::size_t token_count, std::uint64_t token_hash);

}  // namespace strata
