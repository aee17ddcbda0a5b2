#pragma once
// The disk home (ZeRO-Infinity's NVMe tier). Each row that a strategy puts on disk gets a file of
// its own in `[device] disk_path`, reserved (fallocate) the first time, so a full disk is found
// when the row is placed, not mid-step. Reads and writes run in issue order on the tier's own
// thread, through io_uring with O_DIRECT, by way of two aligned staging buffers (double-buffered:
// one chunk is on its way to or from the disk while the other is copied), like a copy stream. The
// files are created unnamed (O_TMPFILE), so a run killed at any moment leaves nothing behind; a
// filesystem that refuses O_DIRECT gets buffered I/O, and the log says so.
//
// A checkpoint keeps a row by hard link (link): the save names the row's file in its own
// directory, copying nothing, and the tier's next write to that row goes to a new file (copy on
// write, a whole row at a time, as rows are always written), so the save keeps the bytes it linked
// while the run goes on. That new file is reserved when the row is next written, so after a save a
// full filesystem is found mid-step (the save stays whole). Each write records the XXH3-64 of the
// bytes written, and for a row of f32 whether they are all finite, which the save records and
// checks beside the link.
//
// One thread (the run's) reserves, issues transfers and links; the tier's own thread carries the
// transfers.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/device/copy_stream.hpp"
#include "strata/dtype.hpp"
#include "strata/memory_category.hpp"

namespace strata {

class Allocator;

// Extents and transfers are multiples of this (O_DIRECT's alignment on the usual block devices).
inline constexpr std::uint64_t kDiskBlockBytes = 4096;

struct DiskTierOptions {
  std::filesystem::path directory;
  std::uint64_t limit = 0;                // bytes the rows' files may hold (a save's links aside); 0: none
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
  std::uint64_t file_bytes = 0;  // the rows' files, as reserved
  CategoryBytes live{};          // bytes of the rows whose only copy is on disk now
  CategoryBytes peak{};
  std::uint64_t peak_total = 0;
  bool direct_io = true;
  bool io_uring = true;
};

class DiskTier {
 public:
  // Proves the directory with a first file; throws std::invalid_argument naming it when it cannot
  // be used.
  explicit DiskTier(DiskTierOptions options);
  ~DiskTier();  // waits for the transfers in flight, then closes (and so deletes) the files no save links
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // A new file for a row of `bytes` (its size rounded up to kDiskBlockBytes), zero-filled; returns
  // the row's extent, the handle the transfers name. Throws std::runtime_error naming `row`, the
  // bytes wanted and the directory when the limit or the filesystem has no room. `element`: the
  // row's values; each write of a floating row (f32, bf16, f16) checks that they are finite.
  std::uint64_t reserve(std::uint64_t bytes, std::string_view row, DType element = DType::u8);
  // Start a transfer of a whole row between host memory and its extent (`bytes`: the row's, as
  // reserved); the memory must stay valid and untouched until the ticket is waited for. Tickets are
  // a copy stream's: in issue order, 0 is "nothing". A write to a row a checkpoint has linked
  // first makes the row a new file, and throws as reserve does when there is no room for it.
  CopyTicket write(std::uint64_t extent, const void* source, std::uint64_t bytes);
  CopyTicket read(std::uint64_t extent, void* destination, std::uint64_t bytes);
  // Blocks until the transfer and every earlier one completed; returns the seconds waited. Throws
  // std::runtime_error naming the file, offset and error when a transfer failed.
  double wait(CopyTicket ticket);
  CopyTicket completed() const;

  // Names the row's file at `path` (a hard link; the row's bytes stay where they are), after the
  // transfers issued so far have landed and the file is flushed (fdatasync), and returns the
  // XXH3-64 of the row's bytes (zeros for a row never written). None, with `why` set, where no link
  // can be made: another filesystem, a filesystem without O_TMPFILE (its files have no inode left
  // to name), an accounting-only tier, and after one of those none is tried again; other refusals
  // (a full disk, a permission) are this link's only. Throws std::runtime_error when the flush fails.
  struct Linked {
    std::uint64_t checksum = 0;
    std::uint64_t bytes = 0;  // the row's, as reserved; the file is that rounded up to kDiskBlockBytes
    bool finite = true;       // a floating row: every value is finite
  };
  std::optional<Linked> link(std::uint64_t extent, const std::filesystem::path& path, std::string& why);
  // Why the first link failed, or "" while none has.
  std::string link_refusal() const;

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
