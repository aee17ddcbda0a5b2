#pragma once
// Where each row's bytes live and how they get there: one buffer per row in its home (the device
// arena, the host arena, or an extent of the disk tier), the moves between homes on the copy
// stream and the disk tier's thread, the loans that bring a disk row into host memory for a
// reader, and what a row's last write means for its other copies. The rows are the tensor table's
// (core/residency/tensor_table.hpp), whose `home` column only this class writes; everything above
// it (the tensor store, the executor, the checkpoint code) asks for rows by index: "make these
// resident there", "lend them to a reader", "these bytes changed". Nothing here knows a parameter,
// an optimizer or a model family.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/residency/disk_tier.hpp"
#include "core/residency/tensor_table.hpp"
#include "core/util/profiler.hpp"

namespace strata {

// Residency moves since the store was built. Copy time is the copy stream's own clock; exposed
// time is how long compute stood waiting for its copies (all of a synchronous move's time). Waits
// on the disk tier are the tier's own figure, not counted here.
struct TransferTotals {
  std::uint64_t bytes_to_host = 0;
  std::uint64_t bytes_to_device = 0;
  double exposed_seconds = 0.0;
};

class Residency {
 public:
  Residency(Backend& backend, Profiler& profiler, TensorTable& table)
      : backend_(backend), profiler_(profiler), table_(table) {}
  ~Residency();  // waits for copies in flight: they write into buffers this object owns
  Residency(const Residency&) = delete;
  Residency& operator=(const Residency&) = delete;

  // The table's newest row (added with its home), held nowhere yet.
  void add_row();

  // --- Allocation. A row is allocated in its home; one on disk gets an extent there, zeroed.
  // Persistent rows (not activations) are allocated zeroed, but those allocated on demand (the
  // fused update's block gradients), which their user allocates and releases itself.
  void allocate_persistent();
  void allocate_on_demand(const std::vector<int>& rows) { on_demand_.insert(rows.begin(), rows.end()); }
  bool allocated_on_demand(int row) const { return on_demand_.contains(row); }
  // A row allocated on demand and not held now: at a data-parallel rank, one another rank keeps,
  // which an initialisation or a load skips.
  bool held_elsewhere(int row) const { return !allocated(row) && allocated_on_demand(row); }
  void allocate(int row, bool zero = false);
  // Frees a row (waiting for a copy in flight); an activation row's home goes back to the device.
  void release(int row);
  // Held somewhere: in memory, or on disk (where data() is null).
  bool allocated(int row) const noexcept {
    const std::size_t index = static_cast<std::size_t>(row);
    return static_cast<bool>(buffers_[index]) || (table_.row(row).home == Home::disk && disk_offset_[index] >= 0);
  }
  // Rows another thread may be reading or writing (a data-parallel sum or broadcast): before a
  // move or a release touches a row's buffer, `wait_for_row(row)` returns once none is.
  void guard_rows(std::function<void(int row)> wait_for_row) { row_guard_ = std::move(wait_for_row); }

  // A row's memory, for ops (null when not in memory). A host row marked zero (mark_zero) is
  // written with its zeros here, before anyone can read it.
  void* data(int row) const noexcept {
    const std::size_t index = static_cast<std::size_t>(row);
    if (zeroed_[index] != 0) write_zeros(row);
    return buffers_[index].data();
  }
  // A host row that holds zeros in meaning but not yet in memory (an offloaded gradient after
  // zero_grads): a move to the device fills zeros there instead of copying, data() writes them.
  void mark_zero(int row) noexcept { zeroed_[static_cast<std::size_t>(row)] = 1; }

  // --- "Make these rows resident in `to`": the one call for any pair of homes. Rows between the
  // disk and the device go through host memory: read in from disk (and waited for) on the way to
  // the device, copied to the host (and waited for) on the way to the disk. `wait`: the last hop
  // lands before this returns; else complete_rows later.
  void make_resident(const std::vector<int>& rows, Home to, bool wait);

  // --- Moves between memory homes, on the copy stream. Until a row's move completes, data() is
  // still the source: readable, but a write would be lost, so every writer completes first. Rows
  // not allocated keep their home if they are activations (computed on the device when they are),
  // else take `to`. A move to or from the disk goes through the host (disk <-> host only).
  void begin_move_rows(const std::vector<int>& rows, Home to);
  // Brings whichever of these rows are held on the host back to the device, and waits; does nothing
  // (and allocates nothing) when none is.
  void bring_to_device(const std::vector<int>& rows);
  void complete_rows(const std::vector<int>& rows);
  void complete_all_moves();
  // Completes the moves whose copies have already landed, freeing their sources; never waits.
  void collect_finished_moves();
  bool moves_in_flight() const noexcept { return moves_in_flight_ > 0; }
  const TransferTotals& transfers() const noexcept { return transfers_; }

  // --- What a write means. Weights fetched from the host keep their host copy (ZeRO-Infinity's
  // parameter offload): until they change, evicting them only frees the device copy. A weight row
  // read in from disk (or written there) and not written since is current on disk, so sending it
  // back needs no write. A writer of weights says so: weights_written clears the disk's claim,
  // drop_host_copy the host's.
  void weights_written(int row) noexcept { disk_current_[static_cast<std::size_t>(row)] = 0; }
  void drop_host_copy(int row) noexcept { host_copy_[static_cast<std::size_t>(row)].reset(); }

  // --- Where rows are, in the SDK's words. Activations read host when any held row is on the
  // host, device when all are held there (a value or the code standing in for it), absent
  // otherwise; other rows read as their first row's home. A row being moved reads as residing at
  // its destination.
  Residence residence(const std::vector<int>& rows, bool activations) const;
  // An activation row and the code row that stands in for it while it is encoded: residence reads
  // the pair as one tensor, held when either is.
  void set_stand_in(int value_row, int code_row);

  // --- The disk home (core/residency/disk_tier.hpp), set before allocate_persistent when a
  // strategy may put rows there. Readers and writers outside the step borrow such rows (Loan).
  void use_disk_tier(DiskTier& tier) noexcept { disk_tier_ = &tier; }
  DiskTier* disk_tier() const noexcept { return disk_tier_; }
  bool any_on_disk() const;
  // Whether the row has an extent in the disk tier (it lives there between uses).
  bool kept_on_disk(int row) const noexcept { return disk_offset_[static_cast<std::size_t>(row)] >= 0; }
  // Brings those of `rows` that live on disk to host memory and waits; returns them.
  std::vector<int> borrow_from_disk(const std::vector<int>& rows);
  // Sends borrowed rows back: written (on the tier's thread) when `changed`, else dropped, the
  // disk holding them still. A write waits for the previous return's to land first.
  void return_to_disk(const std::vector<int>& rows, bool changed);
  // Starts reading those of `rows` that live on disk into host memory, on the tier's thread;
  // returns them (borrow_from_disk is this and a wait).
  std::vector<int> read_from_disk(const std::vector<int>& rows);
  // Starts sending those of `rows` that are in host memory and belong on disk (they have an extent
  // there) back: weights whose disk copy is current are dropped, everything else is written on
  // the tier's thread and freed when the write lands.
  void write_to_disk(const std::vector<int>& rows);
  // A row whose only copy is on disk, named at `path` by a hard link once its transfers have
  // landed (DiskTier::link: a save copies nothing, and the row's next write goes to a new file).
  // None, with `why` set, where the tier cannot link there.
  std::optional<DiskTier::Linked> link_from_disk(int row, const std::filesystem::path& path, std::string& why);

  // Rows that live on disk, in host memory for as long as the loan lasts (a checkpoint's save or
  // load, an export, initial values), then back on disk: written back when the borrower writes
  // them, else dropped. Rows held elsewhere are left alone, so any reader of rows may take one.
  class Loan {
   public:
    enum class Access : std::uint8_t { read, write };
    Loan(Residency& residency, const std::vector<int>& rows, Access access)
        : residency_(residency), rows_(residency.borrow_from_disk(rows)), access_(access) {}
    // A return that fails leaves the rows in host memory, which loses nothing.
    ~Loan() {
      try {
        residency_.return_to_disk(rows_, access_ == Access::write);
      } catch (...) {
      }
    }
    Loan(const Loan&) = delete;
    Loan& operator=(const Loan&) = delete;

   private:
    Residency& residency_;
    std::vector<int> rows_;
    Access access_;
  };

 private:
  // A move in flight: the destination buffer and the copy's ticket, per row; `disk`: the ticket is
  // the disk tier's (a write leaves no destination: the source is freed when it lands).
  struct PendingMove {
    Buffer destination;
    CopyTicket ticket = 0;
    bool disk = false;
  };
  // A buffer for row `r` in `arena`; over the limit, MemoryLimitExceeded naming the row.
  Buffer take(const TensorRow& r, Allocator& arena);
  void begin_disk_move(int row, Home to);
  void drop_to_disk(int row);  // a row in host memory whose disk copy is current: free the memory
  void write_zeros(int row) const noexcept;

  Backend& backend_;
  Profiler& profiler_;
  TensorTable& table_;
  std::vector<Buffer> buffers_;            // parallel to table rows
  std::vector<PendingMove> pending_;       // parallel to table rows
  std::size_t moves_in_flight_ = 0;        // rows with a pending move: lets hooks skip the scan when 0
  std::vector<Buffer> host_copy_;          // parallel to table rows: clean host copies of fetched weights
  std::vector<std::int64_t> disk_offset_;  // parallel to table rows: the row's extent on disk, or -1
  // Parallel to table rows, for weights only: the disk holds the bytes the row holds in memory (it
  // was read from there, or written there, and nothing has written it since), so sending it back
  // needs no write. Every writer of weights clears it (weights_written).
  std::vector<std::uint8_t> disk_current_;
  // Parallel to table rows: mark_zero's rows. Mutable: data() is const, and writing the zeros
  // changes no value.
  mutable std::vector<std::uint8_t> zeroed_;
  // Per row: the code row standing in for an encoded activation (-1: none), and whether it is one.
  std::vector<int> stand_in_;
  std::vector<bool> code_row_;
  std::set<int> on_demand_;  // rows allocate_persistent leaves alone
  std::function<void(int)> row_guard_;
  std::vector<int> returning_;  // the rows of the last return_to_disk whose writes may be in flight
  DiskTier* disk_tier_ = nullptr;
  TransferTotals transfers_;
};

}  // namespace strata
