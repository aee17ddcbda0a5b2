#pragma once
// Data parallel training with ZeRO sharding (docs/architecture.md, "Data parallel"). Each rank
// trains on its share of every batch; after each block's backward (in the step's last micro batch)
// the block's gradients are summed over the ranks in rank order. What a rank keeps is the stage:
//   zero 0: every gradient all-reduced; every rank updates every parameter.
//   zero 1: each parameter has one owner, which alone keeps its optimizer state (its f32 master
//           included) and updates it; the owner's stored weights go to every rank.
//   zero 2: as 1, and a gradient is summed to its owner only; the others free it once sent.
//   zero 3: as 2, and the owner alone keeps the weights (and their f32 masters): another rank
//           receives a block's before the block's forward and again before its backward, and frees
//           them after each; the global parameters' for the length of a micro batch.
// Owners hold contiguous runs of parameters in the model's order, balanced by element count. On CPU
// ranks every sum adds the ranks in rank order, so the stages give the same bits
// (tests/cli/data_parallel.sh); CUDA ranks' device rows are summed by NCCL, in its own order.
//
// The calls overlap computing: a block's sums run on the communicator's thread while the block
// below goes backward, and at zero 3 the next block's weights arrive while this one computes (on
// CUDA ranks NCCL's calls take their turn on the compute stream instead). The
// store waits for a row in flight before it moves or frees it (Residency::guard_rows).
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/distributed/communicator.hpp"
#include "core/tensor/tensor_store.hpp"
#include "strata/ops.hpp"
#include "strata/optimizer.hpp"

namespace strata {

class DataParallel {
 public:
  // Ownership over the store's trained parameters. Before the store allocates its rows. Without
  // `overlap`, every call is waited for where it is made, and nothing is prefetched.
  DataParallel(Communicator& communicator, TensorStore& store, int zero, bool overlap = true);
  // Waits for the calls in flight: they read and write the store's rows.
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  Communicator& communicator() noexcept { return communicator_; }
  int rank() const noexcept { return communicator_.rank(); }
  int ranks() const noexcept { return communicator_.size(); }
  int zero() const noexcept { return zero_; }
  bool owns(std::size_t index) const noexcept { return zero_ == 0 || owners_[index] == rank(); }

  // Before allocation: the rows this rank does not keep are allocated on demand (never, for
  // optimizer state; each step, for a zero 2 gradient).
  void shard_rows();
  // Zero 2: a block's gradients this rank does not own, allocated and zeroed before its first
  // backward of the step. Nothing at other stages.
  void prepare_gradients(int layer);
  // After a block's last backward of the step: starts summing its gradients over the ranks (to
  // every rank at zero 0 and 1, to the owner at zero 2). Zero 2 frees the others' copies once sent:
  // the block before's when this one starts, the rest in finish_reductions.
  void reduce_gradients(int layer);
  // Before anything reads the step's gradients (the precision check, the update): every sum done.
  void finish_reductions();
  // The gradients this rank holds (zero 2: those it owns).
  std::vector<TensorView> held_gradients() const;
  // Zero 1 and up: the global squared gradient norm, each slot's sum of squares from its owner,
  // added in slot order (AdamW's own order, so the norm has the bits zero 0's step computes).
  // `slots` are every trained parameter's, in the store's order.
  double sum_of_squares(Ops& ops, std::span<const ParamSlot> slots);
  // The slots of the parameters this rank owns.
  std::vector<ParamSlot> owned(std::span<const ParamSlot> slots) const;
  // Zero 1 and 2, after the update and its rounding (publish_weights): each owner's stored weights
  // to every rank.
  void share_updated_parameters();
  // Zero 3: a layer's weights (kGlobalParameters: the embeddings, final norm and head) from their
  // owners, allocated where this rank does not own them; nothing when they are here already.
  void gather_weights(int layer);
  // Zero 3: starts gathering the layer the executor uses next, while it computes this one; at most
  // one layer more than the one in use is held.
  void prefetch_weights(int layer);
  // Zero 3: frees the layer's weights this rank does not own.
  void release_weights(int layer);

  // Checkpoints. Rank 0 writes the one-process format, and receives each row it does not keep
  // (optimizer state; at zero 3 the weights and masters too) from the row's owner as the save
  // reaches it, holding one such row at a time: row_for_save is the save's source of a row's bytes,
  // and end_save, once the save is written, frees the row held and releases the other ranks, which
  // answer rank 0's requests in serve_save until then.
  const void* row_for_save(int row);
  void end_save();
  void serve_save();

  // The mean over ranks of each rank's value (added in rank order), and the largest.
  double mean(double mine);
  // The sum of every rank's count (exact: counts below 2^53).
  std::int64_t total(std::int64_t mine);
  int largest(int mine);

 private:
  // The rows of store.parameters()[index] that only its owner keeps: the optimizer state (zero 1
  // and up), the stored weights and the master (zero 3).
  std::vector<int> owner_rows(std::size_t index) const;
  // Submits `job` to the communicator's thread; `rows` are in flight until it has run.
  void start(const std::vector<int>& rows, std::function<void()> job);
  void start_gather(int layer);
  // The store's guard: returns once no call in flight reads or writes `row`.
  void wait_for_row(int row);
  void release_sent_gradients();
  Communicator& communicator_;
  TensorStore& store_;
  int zero_ = 0;
  bool overlap_ = true;
  std::vector<int> owners_;                                  // per store.parameters() index; -1 for a frozen parameter
  std::vector<float> scratch_;                               // the sums', used by the one thread that runs them
  std::unordered_map<int, Communicator::Ticket> in_flight_;  // row -> the job that reads or writes it
  Communicator::Ticket last_ticket_ = 0;
  std::vector<int> sent_gradients_;  // zero 2: others' gradients to free once their sums have run
  int n_layer_ = 0;
  std::vector<bool> gathered_;              // zero 3, per layer + 1: its weights are here for now
  std::unordered_map<int, int> row_owner_;  // the rows only their owner keeps (owner_rows) -> the owner
  int held_for_save_ = -1;                  // rank 0: the row received for the save, or -1
};

}  // namespace strata
