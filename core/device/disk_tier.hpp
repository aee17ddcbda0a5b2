#pragma once
// The disk home (ZeRO-Infinity's NVMe tier, on one file). A row that a strategy puts on disk gets
// a fixed extent of one unnamed file in `[device] disk_path`, reserved (fallocate) the first time,
// so a full disk is found when the row is placed, not mid-step. Reads and writes run in issue
// order on the tier's own thread, through io_uring with O_DIRECT, by way of two aligned staging
// buffers (double-buffered: one chunk is on its way to or from the disk while the other is copied),
// like a copy stream. The file is created unnamed (O_TMPFILE), so a run killed at any moment
// leaves nothing behind; a filesystem that refuses O_DIRECT gets buffered I/O, and the log says so.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/device/copy_stream.hpp"
#include "strata/memory_category.hpp"

namespace strata {

class Allocator;

// Extents and transfers are multiples of this (O_DIRECT's alignment on the usual block devices).
inline constexpr std::uint64_t kDiskBlockBytes = 4096;

struct DiskTierOptions {
  std::filesystem::path directory;
  std::uint64_t limit = 0;                // bytes the file may hold; 0: no limit
  Allocator* staging_arena = nullptr;     // where the staging buffers are accounted; null: not accounted
  std::uint64_t staging_bytes = 4 << 20;  // per staging buffer (two of them)
  // No file and no transfers: extents, holdings and bytes moved are counted, and every transfer is
  // complete when issued. `strata plan` predicts a disk stack's bytes this way (core/planner/).
  bool account_only = false;
  // The system calls that may refuse, replaceable so that tests can inject the refusal.
  std::function<int(const char* path, int flags, mode_t mode)> open_file;
  std::function<int(int fd, off_t offset, off_t length)> reserve_space;  // posix_fallocate's contract
};

struct DiskTierStats {
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  double busy_seconds = 0.0;     // the tier's thread with a transfer in hand
  double waited_seconds = 0.0;   // compute standing still until a transfer landed
  std::uint64_t file_bytes = 0;  // extents reserved so far
  CategoryBytes live{};          // bytes of the rows whose only copy is on disk now
  CategoryBytes peak{};
  std::uint64_t peak_total = 0;
  bool direct_io = true;
  bool io_uring = true;
};

class DiskTier {
 public:
  // Creates the file; throws std::invalid_argument naming the directory when it cannot be used.
  explicit DiskTier(DiskTierOptions options);
  ~DiskTier();  // waits for the transfers in flight, then closes (and so deletes) the file
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // A new extent of `bytes` (rounded up to kDiskBlockBytes), zero-filled; returns its offset.
  // Throws std::runtime_error naming `row`, the bytes wanted and the file when the limit or the
  // filesystem has no room.
  std::uint64_t reserve(std::uint64_t bytes, std::string_view row);
  // Start a transfer between host memory and an extent; the memory must stay valid and untouched
  // until the ticket is waited for. Tickets are a copy stream's: in issue order, 0 is "nothing".
  CopyTicket write(std::uint64_t offset, const void* source, std::uint64_t bytes);
  CopyTicket read(std::uint64_t offset, void* destination, std::uint64_t bytes);
  // Blocks until the transfer and every earlier one completed; returns the seconds waited. Throws
  // std::runtime_error naming the file, offset and error when a transfer failed.
  double wait(CopyTicket ticket);
  CopyTicket completed() const;

  // What lives on disk, for the accounting (the tensor store calls these as rows come and go).
  void hold(MemoryCategory category, std::uint64_t bytes);
  void release(MemoryCategory category, std::uint64_t bytes);

  DiskTierStats stats() const;
  // "/path (O_DIRECT, io_uring)", for the log.
  std::string description() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Why `directory` cannot hold a disk tier (missing, not a directory, not writable), or "" when it
// can: validate and train refuse such a manifest before anything is written.
std::string disk_directory_problem(const std::filesystem::path& directory);

}  // namespace strata
