#include "core/residency/disk_tier.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/device/allocator.hpp"
#include "core/util/format_bytes.hpp"

namespace strata {

namespace {

constexpr std::uint64_t round_up(std::uint64_t bytes, std::uint64_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

std::string error_text(int error) {
  return std::strerror(error);
}

// An unnamed file in `directory`: O_TMPFILE where the filesystem has it, else a named file
// unlinked at once. Returns the descriptor, or -1 with errno set.
int open_unnamed(const DiskTierOptions& options, int extra_flags) {
  const std::string directory = options.directory.string();
  int fd = options.open_file(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | extra_flags, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != ENOENT)) return fd;
  // No O_TMPFILE: a unique name, removed at once, so nothing outlives the run either way.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string name =
        directory + "/.strata-disk-tier-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
    fd = options.open_file(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | extra_flags, 0600);
    if (fd >= 0) {
      ::unlink(name.c_str());
      return fd;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

// A file descriptor, closed with its owner.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// A file a row at a time: a large model's tier holds a few thousand. When the tier's files near
// the soft limit on open files (often 1024), it is raised to the hard one.
void allow_more_files(std::size_t open) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max ||
      static_cast<rlim_t>(open) + 64 < limit.rlim_cur)
    return;
  const rlim_t was = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0)
    spdlog::info("disk tier: {} files open: the limit on open files is raised from {} to {}", open, was,
                 limit.rlim_max);
}

// Whether every value of a floating row is finite (no exponent of all ones), by their bits; other
// elements (codes) have nothing to check.
template <typename Bits>
bool no_exponent_all_ones(const std::byte* bytes, std::uint64_t count, Bits exponent) {
  Bits worst = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    Bits bits;
    std::memcpy(&bits, bytes + sizeof(Bits) * i, sizeof(Bits));
    worst = std::max<Bits>(worst, static_cast<Bits>(bits & exponent));
  }
  return worst != exponent;
}

bool all_finite(const std::byte* bytes, std::uint64_t byte_count, DType element) {
  switch (element) {
    case DType::f32: return no_exponent_all_ones<std::uint32_t>(bytes, byte_count / 4, 0x7f800000u);
    case DType::bf16: return no_exponent_all_ones<std::uint16_t>(bytes, byte_count / 2, 0x7f80u);
    case DType::f16: return no_exponent_all_ones<std::uint16_t>(bytes, byte_count / 2, 0x7c00u);
    default: return true;
  }
}

// XXH3-64 of `bytes` zero bytes: the checksum of a row never written.
std::uint64_t zeros_checksum(std::uint64_t bytes) {
  static const std::vector<std::byte> zeros(std::size_t{1} << 20);
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t piece = std::min<std::uint64_t>(zeros.size(), bytes - done);
    XXH3_64bits_update(&state, zeros.data(), piece);
    done += piece;
  }
  return XXH3_64bits_digest(&state);
}

}  // namespace

struct DiskTier::State {
  // One row's file. The caller's thread creates and replaces files (swapped in under the mutex);
  // the tier's thread records each write's checksum and whether its f32 values are finite.
  struct RowFile {
    UniqueFd fd;
    std::string row;
    std::uint64_t bytes = 0;    // the row's
    std::uint64_t extent = 0;   // the file's: bytes rounded up to kDiskBlockBytes
    DType element = DType::u8;  // a floating row's writes are checked for finite values
    bool linked = false;        // a checkpoint names this file: the next write starts a new one
    bool written = false;
    std::uint64_t checksum = 0;  // of the last write
    bool finite = true;          // the last write's values (a floating row)
  };
  struct Job {
    bool write = false;
    std::byte* host = nullptr;
    std::size_t file = 0;
    int fd = -1;  // the row's file when issued (owned by `files` or `retired` until the job is done)
    DType element = DType::u8;
    std::uint64_t bytes = 0;
  };

  explicit State(DiskTierOptions given) : options(std::move(given)) {
    if (!options.open_file)
      options.open_file = [](const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); };
    if (!options.reserve_space)
      options.reserve_space = [](int fd, off_t offset, off_t length) { return ::posix_fallocate(fd, offset, length); };
    options.staging_bytes = std::max(round_up(options.staging_bytes, kDiskBlockBytes), kDiskBlockBytes);
    allocate_staging();
    if (options.account_only) {
      uring = false;
      return;
    }
    // A first file proves the directory, and whether it takes O_DIRECT; each row gets its own.
    int probe = open_unnamed(options, O_DIRECT);
    if (probe < 0 && errno == EINVAL) {
      // The filesystem refuses O_DIRECT (some network and FUSE filesystems): buffered I/O works
      // everywhere, at the price of the page cache.
      spdlog::warn("disk tier: {} refuses O_DIRECT ({}); using buffered I/O", options.directory.string(),
                   error_text(EINVAL));
      direct_io = false;
      probe = open_unnamed(options, 0);
    }
    if (probe < 0)
      throw std::invalid_argument("[device] disk_path = \"" + options.directory.string() +
                                  "\": cannot create the disk tier's files there: " + error_text(errno));
    ::close(probe);
    if (const int error = io_uring_queue_init(4, &ring, 0); error < 0) {
      spdlog::warn("disk tier: io_uring is not available ({}); using pread/pwrite on the tier's thread",
                   error_text(-error));
      uring = false;
    }
    ring_open = uring;
    worker = std::jthread([this](std::stop_token stop) { run(stop); });
  }

  void allocate_staging() {
    for (std::size_t s = 0; s < staging.size(); ++s) {
      const std::uint64_t bytes = options.staging_bytes + kDiskBlockBytes;
      if (options.staging_arena != nullptr) {
        staging_buffers[s] = options.staging_arena->allocate(bytes, MemoryCategory::workspace, "disk tier");
        staging_base[s] = static_cast<std::byte*>(staging_buffers[s].data());
      } else {
        owned_staging[s] = std::make_unique<std::byte[]>(bytes);
        staging_base[s] = owned_staging[s].get();
      }
      const auto address = reinterpret_cast<std::uintptr_t>(staging_base[s]);
      staging[s] = staging_base[s] + (round_up(address, kDiskBlockBytes) - address);
    }
  }

  ~State() {
    worker.request_stop();
    if (worker.joinable()) worker.join();  // drains the queue first
    if (ring_open) io_uring_queue_exit(&ring);
  }

  // A new unnamed file of `extent` bytes, reserved; throws std::runtime_error naming the row.
  UniqueFd new_file(std::string_view row, std::uint64_t extent, std::string_view held) {
    UniqueFd file(open_unnamed(options, direct_io ? O_DIRECT : 0));
    if (file.get() < 0)
      throw std::runtime_error("disk tier: cannot create a file for " + std::string(row) + " in " +
                               options.directory.string() + ": " + error_text(errno));
    if (const int error = options.reserve_space(file.get(), 0, static_cast<off_t>(extent)); error != 0)
      throw std::runtime_error("disk tier: no room for " + std::string(row) + " in " + options.directory.string() +
                               ": " + std::to_string(extent) + " bytes more needed (" + std::string(held) +
                               "): " + error_text(error));
    return file;
  }

  // Files replaced by a copy on write, closed once the transfers issued before the swap landed.
  void close_retired() {
    std::erase_if(retired, [&](const std::pair<UniqueFd, CopyTicket>& file) { return file.second <= completed; });
  }

  // Issues a transfer, the mutex held by the caller (the row's file looked up under the same lock).
  CopyTicket enqueue_locked(const Job& job) {
    close_retired();
    const CopyTicket ticket = ++issued;
    if (options.account_only) {
      (job.write ? bytes_written : bytes_read) += job.bytes;
      completed = ticket;
      return ticket;
    }
    jobs.push_back(job);
    work_ready.notify_one();
    return ticket;
  }

  void run(std::stop_token stop) {
    std::unique_lock lock(mutex);
    while (true) {
      if (!work_ready.wait(lock, stop, [&] { return !jobs.empty(); })) return;
      const Job job = jobs.front();
      jobs.pop_front();
      const bool failed_before = !error.empty();
      lock.unlock();
      const auto start = std::chrono::steady_clock::now();
      std::string problem;
      // The bytes a write leaves on disk, checksummed (and an f32 row's values checked) from host
      // memory as they go out, so a save that links the row need not read it back.
      const bool wrote = job.write && !failed_before;
      const std::uint64_t checksum = wrote ? XXH3_64bits(job.host, job.bytes) : 0;
      const bool finite = !wrote || all_finite(job.host, job.bytes, job.element);
      if (!failed_before) problem = transfer(job);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      lock.lock();
      busy_seconds += seconds;
      if (wrote && problem.empty()) {
        files[job.file].written = true;
        files[job.file].checksum = checksum;
        files[job.file].finite = finite;
      }
      (job.write ? bytes_written : bytes_read) += problem.empty() && !failed_before ? job.bytes : 0;
      if (!problem.empty() && error.empty()) error = problem;
      ++completed;
      job_done.notify_all();
    }
  }

  // One chunk in one staging slot: submitted, then finished.
  struct Slot {
    bool busy = false;
    bool done = false;
    int result = 0;
    int fd = -1;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };

  void submit(std::size_t s, bool write, int fd, std::uint64_t offset, std::uint64_t bytes) {
    Slot& slot = slots[s];
    slot = Slot{true, false, 0, fd, offset, bytes};
    if (uring) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);  // never null: at most two of the ring's four in flight
      if (write)
        io_uring_prep_write(sqe, fd, staging[s], static_cast<unsigned>(bytes), offset);
      else
        io_uring_prep_read(sqe, fd, staging[s], static_cast<unsigned>(bytes), offset);
      io_uring_sqe_set_data64(sqe, s);
      if (const int submitted = io_uring_submit(&ring); submitted == 1) return;
      // Not submitted: no completion will come for it. This chunk, and every later one, go the
      // synchronous way; a chunk already in the ring still completes there.
      spdlog::warn("disk tier: io_uring refused a transfer; using pread/pwrite from now on");
      uring = false;
    }
    slot.result = write ? static_cast<int>(::pwrite(fd, staging[s], bytes, static_cast<off_t>(offset)))
                        : static_cast<int>(::pread(fd, staging[s], bytes, static_cast<off_t>(offset)));
    if (slot.result < 0) slot.result = -errno;
    slot.done = true;
  }

  // Waits for slot s's chunk; a short transfer is finished with pread/pwrite. "" or the problem.
  std::string finish(std::size_t s, bool write) {
    Slot& slot = slots[s];
    while (!slot.done) {
      io_uring_cqe* cqe = nullptr;
      if (const int waited = io_uring_wait_cqe(&ring, &cqe); waited < 0) {
        if (waited == -EINTR) continue;
        return "io_uring: " + error_text(-waited);
      }
      Slot& landed = slots[static_cast<std::size_t>(io_uring_cqe_get_data64(cqe))];
      landed.result = cqe->res;
      landed.done = true;
      io_uring_cqe_seen(&ring, cqe);
    }
    slot.busy = false;
    std::uint64_t moved = slot.result > 0 ? static_cast<std::uint64_t>(slot.result) : 0;
    int result = slot.result;
    while (result >= 0 && moved < slot.bytes) {
      const std::uint64_t left = slot.bytes - moved;
      const auto at = static_cast<off_t>(slot.offset + moved);
      const ssize_t n =
          write ? ::pwrite(slot.fd, staging[s] + moved, left, at) : ::pread(slot.fd, staging[s] + moved, left, at);
      if (n <= 0) {
        result = n < 0 ? -errno : -EIO;  // a read past the end or a write that makes no progress
        break;
      }
      moved += static_cast<std::uint64_t>(n);
    }
    if (result < 0)
      return std::string(write ? "writing " : "reading ") + format_bytes(slot.bytes) + " at offset " +
             std::to_string(slot.offset) + " of a row's file in the disk tier in " + options.directory.string() + ": " +
             error_text(-result);
    return {};
  }

  // A job in chunks of the staging size: while one slot's chunk is on its way, the other's is copied.
  std::string transfer(const Job& job) {
    const std::uint64_t chunk = options.staging_bytes;
    const std::uint64_t chunks = (job.bytes + chunk - 1) / chunk;
    const auto span = [&](std::uint64_t c) {
      const std::uint64_t first = c * chunk;
      return std::pair{first, std::min(chunk, job.bytes - first)};
    };
    std::string problem;
    const auto finish_all = [&] {
      for (std::size_t s = 0; s < slots.size(); ++s)
        if (slots[s].busy)
          if (std::string p = finish(s, job.write); problem.empty()) problem = std::move(p);
    };
    if (job.write) {
      for (std::uint64_t c = 0; c < chunks && problem.empty(); ++c) {
        const std::size_t s = c % 2;
        if (slots[s].busy) problem = finish(s, true);
        if (!problem.empty()) break;
        const auto [first, bytes] = span(c);
        std::memcpy(staging[s], job.host + first, bytes);
        const std::uint64_t padded = round_up(bytes, kDiskBlockBytes);
        std::memset(staging[s] + bytes, 0, padded - bytes);
        submit(s, true, job.fd, first, padded);
      }
      finish_all();
      return problem;
    }
    for (std::uint64_t c = 0; c < std::min<std::uint64_t>(chunks, 2); ++c) {
      const auto [first, bytes] = span(c);
      submit(c % 2, false, job.fd, first, round_up(bytes, kDiskBlockBytes));
    }
    for (std::uint64_t c = 0; c < chunks; ++c) {
      const std::size_t s = c % 2;
      problem = finish(s, false);
      if (!problem.empty()) break;
      const auto [first, bytes] = span(c);
      std::memcpy(job.host + first, staging[s], bytes);
      if (c + 2 < chunks) {
        const auto [next_first, next_bytes] = span(c + 2);
        submit(s, false, job.fd, next_first, round_up(next_bytes, kDiskBlockBytes));
      }
    }
    finish_all();
    return problem;
  }

  DiskTierOptions options;
  bool direct_io = true;
  std::atomic<bool> uring{true};  // transfers go through the ring; the tier's thread may turn it off
  bool ring_open = false;         // the ring was set up, and is torn down at the end
  io_uring ring{};
  std::array<Buffer, 2> staging_buffers;
  std::array<std::unique_ptr<std::byte[]>, 2> owned_staging;
  std::array<std::byte*, 2> staging_base{};
  std::array<std::byte*, 2> staging{};  // aligned to kDiskBlockBytes
  std::array<Slot, 2> slots{};          // the tier's thread's own

  std::uint64_t file_bytes = 0;  // the caller's thread's own
  CategoryBytes live{};
  CategoryBytes peak{};
  std::uint64_t peak_total = 0;
  double waited_seconds = 0.0;

  mutable std::mutex mutex;                              // guards what follows
  std::vector<RowFile> files;                            // by extent
  std::vector<std::pair<UniqueFd, CopyTicket>> retired;  // a file and the last ticket that may use it
  std::string link_refusal;                              // why the first link failed; none is tried after
  std::condition_variable_any work_ready;
  std::condition_variable job_done;
  std::deque<Job> jobs;
  CopyTicket issued = 0;
  CopyTicket completed = 0;
  std::string error;  // the first transfer that failed; every later one fails with it
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  double busy_seconds = 0.0;
  std::jthread worker;  // last: it starts after, and stops before, the state it uses
};

DiskTier::DiskTier(DiskTierOptions options) : state_(std::make_unique<State>(std::move(options))) {}

DiskTier::~DiskTier() = default;

std::uint64_t DiskTier::reserve(std::uint64_t bytes, std::string_view row, DType element) {
  State& s = *state_;
  const std::uint64_t extent = round_up(std::max<std::uint64_t>(bytes, 1), kDiskBlockBytes);
  const std::uint64_t held = s.file_bytes;
  if (s.options.limit > 0 && held + extent > s.options.limit)
    throw std::runtime_error("disk tier: " + std::string(row) + " needs " + format_bytes(extent) +
                             " more on disk, past [device] disk_limit = " + format_bytes(s.options.limit) + " (" +
                             format_bytes(held) + " held already)");
  State::RowFile file{{}, std::string(row), bytes, extent, element};
  if (!s.options.account_only) {
    allow_more_files(s.files.size() + 1);
    file.fd = s.new_file(row, extent, "the tier holds " + std::to_string(held));
  }
  s.file_bytes = held + extent;
  std::lock_guard lock(s.mutex);
  s.files.push_back(std::move(file));
  return s.files.size() - 1;
}

CopyTicket DiskTier::write(std::uint64_t extent, const void* source, std::uint64_t bytes) {
  State& s = *state_;
  std::string row;
  std::uint64_t file_extent = 0;
  bool linked = false;
  DType element = DType::u8;
  {
    std::lock_guard lock(s.mutex);
    const State::RowFile& file = s.files.at(extent);
    if (bytes != file.bytes) throw std::logic_error("disk tier: " + file.row + " is written whole, not in part");
    row = file.row, file_extent = file.extent, linked = file.linked, element = file.element;
  }
  if (linked) {
    // A checkpoint names this file: the row goes on in a new one, the save keeps the bytes it
    // linked. Made outside the lock (the tier's thread takes it between transfers); only this
    // thread swaps files.
    UniqueFd fresh = s.new_file(row, file_extent, "a checkpoint holds the row's earlier bytes");
    std::lock_guard lock(s.mutex);
    State::RowFile& file = s.files.at(extent);
    s.retired.emplace_back(std::move(file.fd), s.issued);
    file.fd = std::move(fresh);
    file.linked = false;
  }
  std::lock_guard lock(s.mutex);
  return s.enqueue_locked(
      {true, static_cast<std::byte*>(const_cast<void*>(source)), extent, s.files.at(extent).fd.get(), element, bytes});
}

CopyTicket DiskTier::read(std::uint64_t extent, void* destination, std::uint64_t bytes) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const State::RowFile& file = s.files.at(extent);
  if (bytes != file.bytes) throw std::logic_error("disk tier: " + file.row + " is read whole, not in part");
  return s.enqueue_locked({false, static_cast<std::byte*>(destination), extent, file.fd.get(), file.element, bytes});
}

std::optional<DiskTier::Linked> DiskTier::link(std::uint64_t extent, const std::filesystem::path& path,
                                               std::string& why) {
  State& s = *state_;
  if (s.options.account_only) {
    why = "the tier is accounted only, with no files";
    return std::nullopt;
  }
  CopyTicket issued = 0;
  {
    std::lock_guard lock(s.mutex);
    if (!s.link_refusal.empty()) {
      why = s.link_refusal;
      return std::nullopt;
    }
    issued = s.issued;
  }
  (void)wait(issued);  // the row's last write has landed, and its checksum is recorded
  std::unique_lock lock(s.mutex);
  const State::RowFile& file = s.files.at(extent);
  const int fd = file.fd.get();
  const std::string row = file.row;
  const bool written = file.written;
  Linked linked{file.checksum, file.bytes, !written || file.finite};
  lock.unlock();
  // What the save names must survive a crash once `latest` names it: the data and the file's own
  // record of it are flushed first. Readable as the save's other files are.
  if (::fdatasync(fd) != 0)
    throw std::runtime_error("disk tier: cannot flush " + row + " to " + s.options.directory.string() + ": " +
                             error_text(errno));
  ::fchmod(fd, 0644);
  // O_TMPFILE's files are linked by descriptor (AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH, so the
  // /proc path is the fallback); a named file unlinked at creation has no inode left to name.
  int made = ::linkat(fd, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH);
  if (made != 0 && errno != EXDEV && errno != EEXIST) {
    const std::string by_proc = "/proc/self/fd/" + std::to_string(fd);
    made = ::linkat(AT_FDCWD, by_proc.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
  }
  if (made != 0) {
    const int error = errno;
    why = error == EXDEV ? "it is on another filesystem than [device] disk_path"
                         : "the tier's files cannot be linked there (" + error_text(error) + ")";
    // Another filesystem, or files with no name to link (no O_TMPFILE), stay so for the run; a
    // full disk or a permission may not.
    if (error == EXDEV || error == ENOENT || error == EPERM || error == EOPNOTSUPP) {
      lock.lock();
      s.link_refusal = why;
    }
    return std::nullopt;
  }
  if (!written) linked.checksum = zeros_checksum(linked.bytes);
  lock.lock();
  s.files.at(extent).linked = true;
  return linked;
}

std::string DiskTier::link_refusal() const {
  std::lock_guard lock(state_->mutex);
  return state_->link_refusal;
}

double DiskTier::wait(CopyTicket ticket) {
  State& s = *state_;
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(s.mutex);
  s.job_done.wait(lock, [&] { return s.completed >= ticket; });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  s.waited_seconds += seconds;
  if (!s.error.empty()) throw std::runtime_error("disk tier: " + s.error);
  return seconds;
}

CopyTicket DiskTier::completed() const {
  std::lock_guard lock(state_->mutex);
  return state_->completed;
}

void DiskTier::hold(MemoryCategory category, std::uint64_t bytes) {
  State& s = *state_;
  std::uint64_t& live = s.live[category_index(category)];
  live += bytes;
  s.peak[category_index(category)] = std::max(s.peak[category_index(category)], live);
  s.peak_total = std::max(s.peak_total, total_bytes(s.live));
}

void DiskTier::release(MemoryCategory category, std::uint64_t bytes) {
  std::uint64_t& live = state_->live[category_index(category)];
  live -= std::min(live, bytes);
}

DiskTierStats DiskTier::stats() const {
  const State& s = *state_;
  DiskTierStats stats;
  stats.file_bytes = s.file_bytes;
  stats.live = s.live;
  stats.peak = s.peak;
  stats.peak_total = s.peak_total;
  stats.waited_seconds = s.waited_seconds;
  stats.direct_io = s.direct_io;
  stats.io_uring = s.uring;
  std::lock_guard lock(s.mutex);
  stats.bytes_read = s.bytes_read;
  stats.bytes_written = s.bytes_written;
  stats.busy_seconds = s.busy_seconds;
  return stats;
}

std::string DiskTier::description() const {
  if (state_->options.account_only) return state_->options.directory.string() + " (accounted, no file)";
  return state_->options.directory.string() + " (" + (state_->direct_io ? "O_DIRECT" : "buffered") + ", " +
         (state_->uring ? "io_uring" : "pread/pwrite") + ")";
}

std::string disk_directory_problem(const std::filesystem::path& directory) {
  std::error_code error;
  const auto status = std::filesystem::status(directory, error);
  if (!std::filesystem::exists(status)) return "does not exist";
  if (!std::filesystem::is_directory(status)) return "is not a directory";
  // Root passes every permission check, so try what the run will do: create an unnamed file.
  DiskTierOptions probe;
  probe.directory = directory;
  probe.open_file = [](const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); };
  const int fd = open_unnamed(probe, 0);
  if (fd < 0) return "refuses new files (" + error_text(errno) + ")";
  ::close(fd);
  return {};
}

}  // namespace strata
