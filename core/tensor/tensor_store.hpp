#pragma once
// The memory behind a TensorTable: one buffer per row, allocated in the row's home (the backend's
// device or host arena), and residency — moving groups of rows between homes on the copy stream.
// Model families declare rows here and compute on them through the backend's ops; strategies move
// them through the executor's hook context. Nothing in this file knows a model family.
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/device/disk_tier.hpp"
#include "core/tensor/tensor_table.hpp"
#include "core/util/profiler.hpp"
#include "strata/optimizer.hpp"
#include "strata/precision_policy.hpp"
#include "strata/weight_quantizer.hpp"

namespace strata {

// What a parameter is to the strategies' plan (core/model/trainable_plan.hpp): trained, frozen
// (kept as initialised or loaded: a checkpoint leaves it out and records its fingerprint), or an
// adapter's tensor (strata/matmul_adapter.hpp), which trains and which a base model file lacks.
enum class ParameterRole : std::uint8_t { trained, frozen, adapter };

// One trainable tensor and the rows that go with it.
struct ParameterRows {
  std::string name;  // the table name, which is the checkpoint name of the model's family
  int layer = -1;
  ParamKind kind = ParamKind::other;
  bool decay = false;
  int param = -1;
  int grad = -1;
  std::array<int, kMaxOptimizerStateBuffers> state{-1, -1, -1, -1};
  int master = -1;  // the f32 master copy the optimizer updates, when `param` is stored as bf16 or quantized
  // Quantized storage: the f32 scales row (moved with the weights) and the group size its scales
  // cover; the layout the matmuls read the matrix in.
  int scales = -1;
  std::int64_t group_size = 0;
  WeightLayout layout = WeightLayout::in_out;
  ParameterRole role = ParameterRole::trained;  // also in a model built for evaluation
};

// A parameter's stored weights: its values and, for a quantized matrix, its scales.
inline std::vector<int> stored_weight_rows(const ParameterRows& rows) {
  return rows.scales >= 0 ? std::vector<int>{rows.param, rows.scales} : std::vector<int>{rows.param};
}

// Residency moves since the store was built. Copy time is the copy stream's own clock; exposed
// time is how long compute stood waiting for its copies (all of a synchronous move's time). Waits
// on the disk tier are the tier's own figure, not counted here.
struct TransferTotals {
  std::uint64_t bytes_to_host = 0;
  std::uint64_t bytes_to_device = 0;
  double exposed_seconds = 0.0;
};

// When persistent rows (weights, grads, optimizer state, workspace) get memory: at once, on the
// device; or later, by allocate_persistent(), in the homes that strategies chose meanwhile (so
// offloaded state never touches the device, not even at start-up).
enum class Allocation : std::uint8_t { now, deferred };

class TensorStore {
 public:
  TensorStore(Backend& backend, Profiler& profiler) : backend_(backend), profiler_(profiler) {}
  ~TensorStore();  // waits for copies in flight: they write into buffers this store owns
  TensorStore(const TensorStore&) = delete;
  TensorStore& operator=(const TensorStore&) = delete;

  // Declaring rows (before any is allocated).
  int add_row(std::string name, int layer, std::vector<std::int64_t> shape, MemoryCategory category, TensorGroup group,
              ElementType element = ElementType::f32);
  // A parameter with its gradient and optimizer state (as the optimizer lays it out); stored as
  // `storage`: bf16 or a quantized dtype adds an f32 master copy, counted as optimizer state, which
  // the optimizer updates; a quantized matrix also has a scales row beside its values, sized by the
  // weight quantizer for `layout`. An untrained parameter (for evaluation) has no gradient, state or
  // master.
  // Weight decay applies to matrices and embeddings.
  const ParameterRows& add_parameter(const std::string& name, int layer, std::vector<std::int64_t> shape,
                                     ParamKind kind, DType storage, const StateLayout& state, bool trained = true,
                                     WeightLayout layout = WeightLayout::in_out);
  void set_role(int parameter, ParameterRole role) { parameters_.at(static_cast<std::size_t>(parameter)).role = role; }
  // Matrices stored as quantizer.dtype() are quantized by it, and the matmuls that read them run
  // its kernels (ops() routes them). Set before the first such parameter is added.
  void use_weight_quantizer(WeightQuantizer& quantizer, std::string label = "the weight quantizer");
  // bf16 parameters are rounded by `rounding` instead of to nearest even.
  void use_bf16_rounding(Bf16Rounding& rounding) noexcept { rounding_ = &rounding; }
  // The f32 scratch the matmuls on a parameter's stored form want for `input_rows` rows: none for
  // f32, the whole matrix for bf16 (widened) and quantized ones, or what the quantizer asks if more.
  std::int64_t matmul_scratch_floats(const ParameterRows& rows, std::int64_t input_rows) const;

  Backend& backend() noexcept { return backend_; }
  // The backend's op table, with the weight quantizer's matmuls in front of it when there is one.
  Ops& ops() noexcept { return quantized_ops_ ? *quantized_ops_ : backend_.ops(); }
  Profiler& profiler() noexcept { return profiler_; }
  const TensorTable& table() const noexcept { return table_; }
  TensorTable& table() noexcept { return table_; }
  const std::vector<ParameterRows>& parameters() const noexcept { return parameters_; }

  // Allocation. Persistent rows are zeroed (through the backend's fill op on the device).
  // Every unallocated row that is not an activation, in its home, but rows allocated on demand.
  void allocate_persistent();
  // Rows their user allocates and releases itself (the fused update's block gradients).
  void allocate_on_demand(const std::vector<int>& rows) { on_demand_.insert(rows.begin(), rows.end()); }
  bool allocated_on_demand(int row) const { return on_demand_.contains(row); }
  // A row allocated on demand and not held now: at a data-parallel rank, one another rank keeps,
  // which an initialisation or a load skips.
  bool held_elsewhere(int row) const { return !allocated(row) && allocated_on_demand(row); }
  void allocate(int row, bool zero = false);
  // Frees a row (waiting for a copy in flight); an activation row's home goes back to the device.
  void release(int row);
  // Rows another thread may be reading or writing (a data-parallel sum or broadcast): before a
  // move or a release touches a row's buffer, `wait_for_row(row)` returns once none is.
  void guard_rows(std::function<void(int row)> wait_for_row) { row_guard_ = std::move(wait_for_row); }
  // Held somewhere: in memory, or on disk (where data() is null).
  bool allocated(int row) const noexcept {
    const std::size_t index = static_cast<std::size_t>(row);
    return static_cast<bool>(buffers_[index]) || (table_.row(row).home == Home::disk && disk_offset_[index] >= 0);
  }

  // The disk home (core/device/disk_tier.hpp), set before allocate_persistent when a strategy may
  // put rows there. Rows move between the host and the disk only; a row placed on disk before
  // allocation starts there, zeroed. Readers and writers outside the step borrow such rows
  // (DiskLoan, below).
  void use_disk_tier(DiskTier& tier) noexcept { disk_tier_ = &tier; }
  DiskTier* disk_tier() const noexcept { return disk_tier_; }
  bool any_on_disk() const;
  // Brings those of `rows` that live on disk to host memory and waits; returns them.
  std::vector<int> borrow_from_disk(const std::vector<int>& rows);
  // Sends borrowed rows back: written (on the tier's thread) when `changed`, else dropped, the
  // disk holding them still. A write waits for the previous return's to land first.
  void return_to_disk(const std::vector<int>& rows, bool changed);
  // A row whose only copy is on disk (its home is Home::disk), named at `path` by a hard link once
  // its transfers have landed (DiskTier::link: a save copies nothing, and the row's next write goes
  // to a new file). None, with `why` set, where the tier cannot link there.
  std::optional<DiskTier::Linked> link_from_disk(int row, const std::filesystem::path& path, std::string& why);
  // Starts reading those of `rows` that live on disk into host memory, on the tier's thread;
  // returns them (borrow_from_disk is this and a wait).
  std::vector<int> read_from_disk(const std::vector<int>& rows);
  // Starts sending those of `rows` that are in host memory and belong on disk (they have an extent
  // there) back: weights whose disk copy is current (read in, and not written since) are dropped,
  // everything else is written on the tier's thread and freed when the write lands.
  void write_to_disk(const std::vector<int>& rows);
  // Set by the executor while it updates rows in host memory on the host (Executor::set_host_update):
  // the masters' rounding into bf16 weights runs there too.
  void set_update_on_host(bool on_host) noexcept { update_on_host_ = on_host; }
  // Whether the row has an extent in the disk tier (it lives there between uses).
  bool kept_on_disk(int row) const noexcept { return disk_offset_[static_cast<std::size_t>(row)] >= 0; }
  // The rows of a layer's groups that live on disk now.
  std::vector<int> rows_on_disk(int layer, std::initializer_list<TensorGroup> groups) const;

  // Pointers into a row's memory, for ops (null when unallocated). The caller never reads them on
  // the host unless the row's home is the host. A host gradient zero_grads left unwritten is
  // written with zeros here, before anyone can read it.
  void* data(int row) const noexcept {
    const std::size_t index = static_cast<std::size_t>(row);
    if (zeroed_[index] != 0) write_zeros(row);
    return buffers_[index].data();
  }
  float* f32(int row) const noexcept { return static_cast<float*>(data(row)); }
  std::uint16_t* bf16(int row) const noexcept { return static_cast<std::uint16_t*>(data(row)); }
  std::int32_t* i32(int row) const noexcept { return static_cast<std::int32_t*>(data(row)); }
  Weight weight(int row) const noexcept;  // with its scales, when the row is a quantized matrix
  TensorView view(int row) const noexcept;
  // A parameter's value in f32: its master copy when it is stored as bf16 or quantized. Whoever
  // writes it (the optimizer, a checkpoint load) calls publish_weights() afterwards.
  int value_row(const ParameterRows& rows) const noexcept { return rows.master >= 0 ? rows.master : rows.param; }
  TensorView values(const ParameterRows& rows) const noexcept { return view(value_row(rows)); }
  // Rounds every master copy into its bf16 weights, or quantizes it into its quantized weights;
  // nothing to do with f32 weights. `step`: the update the masters hold (0: initial or loaded
  // values; a resume: the checkpoint's step), for a rounding of the precision policy's own.
  void publish_weights(std::int64_t step = 0);
  // The same for one layer's parameters (kGlobalParameters: those outside the blocks), whose
  // masters must be in memory: the step in parts publishes each block while its state is in.
  void publish_layer_weights(std::int64_t step, int layer);
  // Writes f32 values, from element `first` on, into a parameter that has no master (evaluation):
  // narrowed or quantized on the way, through an f32 staging buffer in the device arena for a
  // quantized matrix. Only f32 and plainly rounded bf16 storage take a slice
  // (writes_stored_slices); quantized weights, and a precision policy's own bf16 rounding, take
  // the whole tensor at once.
  void write_stored_values(const ParameterRows& rows, std::span<const float> values, std::size_t first = 0);
  bool writes_stored_slices(const ParameterRows& rows) const noexcept;
  // Every gradient to zero: on the device, filled there; in host memory (offloaded), only marked,
  // since the next thing to happen to it is a move to the device (zeros filled there, not copied
  // across the bus) or a read (zeros written first, by data()).
  void zero_grads();
  void zero(float* data, std::int64_t count);

  // Residency of a block's weights, grads, optimizer state or activations (layer -1: the global
  // parameters). Activations read host when any is on the host, device when all are held there
  // (a value or its code, core/model/activation_codes.hpp), absent otherwise. A group being moved
  // reads as residing at its destination.
  Residence residence(int layer, TensorGroup group) const;
  // An activation row and the code row that stands in for it while it is encoded: residence reads
  // the pair as one tensor, held when either is.
  void set_stand_in(int value_row, int code_row);
  // Moves a group and waits for the copy.
  void move_group(int layer, TensorGroup group, Home to);
  // Starts moving a group on the copy stream. Until complete_moves, the group's data() is still
  // the source: readable, but a write would be lost, so everything that writes completes first.
  void begin_move_group(int layer, TensorGroup group, Home to);
  // The same for chosen rows (a block's activations but its output). Rows not allocated keep
  // their home if they are activations (computed on the device when they are), else take `to`.
  void begin_move_rows(const std::vector<int>& rows, Home to);
  // Brings whichever of these rows are held on the host back to the device, and waits; does nothing
  // (and allocates nothing) when none is.
  void bring_to_device(const std::vector<int>& rows);
  void complete_moves(int layer, TensorGroup group);
  void complete_rows(const std::vector<int>& rows);
  void complete_all_moves();
  // Completes the moves whose copies have already landed, freeing their sources; never waits.
  void collect_finished_moves();
  // Weights fetched from the host keep their host copy (ZeRO-Infinity's parameter offload): until
  // the weights change, evicting them only frees the device copy. The optimizer calls this before
  // it writes weights that are on the device, whose host copies would go stale.
  void drop_stale_weight_copies(std::optional<int> layer = std::nullopt);  // one layer's, or all
  const TransferTotals& transfers() const noexcept { return transfers_; }
  // The rows of a layer's group (kGlobalParameters: outside the blocks).
  std::vector<int> group_rows(int layer, TensorGroup group) const;

 private:
  // A move in flight: the destination buffer and the copy's ticket, per row; `disk`: the ticket is
  // the disk tier's (a write leaves no destination: the source is freed when it lands).
  struct PendingMove {
    Buffer destination;
    CopyTicket ticket = 0;
    bool disk = false;
  };
  void begin_disk_move(int row, Home to);
  void mark_weights_written(const ParameterRows& rows) noexcept;
  void drop_to_disk(int row);  // a row in host memory whose disk copy is current: free the memory
  void publish(const ParameterRows& rows, std::int64_t step);
  // During an update on the host, the backend's host op table when every row lives in host memory
  // (Backend::host_ops), else its op table: the executor's host update rounds offloaded masters
  // on the host, having completed their moves and run their update there.
  Ops& ops_for_rows(std::initializer_list<int> rows) noexcept;

  void quantize(const ParameterRows& rows, const float* master);
  // A row marked by zero_grads: its zeros, written now into its host memory.
  void write_zeros(int row) const noexcept;

  Backend& backend_;
  Profiler& profiler_;
  WeightQuantizer* quantizer_ = nullptr;
  Bf16Rounding* rounding_ = nullptr;
  std::unique_ptr<Ops> quantized_ops_;
  std::vector<int> parameter_of_row_;  // parallel to table rows: the parameter whose value row it is, or -1
  TensorTable table_;
  std::vector<ParameterRows> parameters_;
  std::vector<Buffer> buffers_;            // parallel to table rows
  std::vector<PendingMove> pending_;       // parallel to table rows
  std::size_t moves_in_flight_ = 0;        // rows with a pending move: lets hooks skip the scan when 0
  std::vector<Buffer> host_copy_;          // parallel to table rows: clean host copies of fetched weights
  std::vector<std::int64_t> disk_offset_;  // parallel to table rows: the row's extent on disk, or -1
  // Parallel to table rows, for weights only: the disk holds the bytes the row holds in memory (it
  // was read from there, or written there, and nothing has written it since), so sending it back
  // needs no write. Every writer of weights clears it (publish, write_stored_values,
  // drop_stale_weight_copies).
  std::vector<std::uint8_t> disk_current_;
  // Parallel to table rows: a host-resident gradient that holds zeros in meaning but not yet in
  // memory (zero_grads). A move to the device fills zeros there instead of copying; data() writes
  // them first. Mutable: data() is const, and writing the zeros changes no value.
  mutable std::vector<std::uint8_t> zeroed_;
  // Per row: the code row standing in for an encoded activation (-1: none), and whether it is one.
  std::vector<int> stand_in_;
  std::vector<bool> code_row_;
  std::set<int> on_demand_;  // rows allocate_persistent leaves alone
  std::function<void(int)> row_guard_;
  std::vector<int> returning_;  // the rows of the last return_to_disk whose writes may be in flight
  DiskTier* disk_tier_ = nullptr;
  bool update_on_host_ = false;
  TransferTotals transfers_;
};

// Rows that live on disk, in host memory for as long as the loan lasts (a checkpoint's save or
// load, an export, initial values), then back on disk: written back when the borrower writes them,
// else dropped. Rows held elsewhere are left alone, so any reader of rows may take one.
class DiskLoan {
 public:
  enum class Access : std::uint8_t { read, write };
  DiskLoan(TensorStore& store, const std::vector<int>& rows, Access access)
      : store_(store), rows_(store.borrow_from_disk(rows)), access_(access) {}
  // A return that fails leaves the rows in host memory, which loses nothing.
  ~DiskLoan() {
    try {
      store_.return_to_disk(rows_, access_ == Access::write);
    } catch (...) {
    }
  }
  DiskLoan(const DiskLoan&) = delete;
  DiskLoan& operator=(const DiskLoan&) = delete;

 private:
  TensorStore& store_;
  std::vector<int> rows_;
  Access access_;
};

}  // namespace strata
