#pragma once
// Data parallel training with ZeRO sharding (docs/architecture.md, "Data parallel"). Each rank
// trains on its share of every batch; after each block's backward (in the step's last micro batch)
// the block's gradients are summed over the ranks in rank order. What a rank keeps is the stage:
//   zero 0: every gradient all-reduced; every rank updates every parameter.
//   zero 1: each parameter has one owner, which alone keeps its optimizer state and updates it;
//           the updated values go from the owner to every rank.
//   zero 2: as 1, and a gradient is summed to its owner only; the others free it once sent.
// Owners hold contiguous runs of parameters in the model's order, balanced by element count. Every
// sum adds the ranks in rank order, so the stages give the same bits (tests/cli_data_parallel.sh).
#include <cstdint>
#include <span>
#include <vector>

#include "core/distributed/communicator.hpp"
#include "core/tensor/tensor_store.hpp"
#include "strata/ops.hpp"
#include "strata/optimizer.hpp"

namespace strata {

class DataParallel {
 public:
  // Ownership over the store's trained parameters. Before the store allocates its rows.
  DataParallel(Communicator& communicator, TensorStore& store, int zero);

  Communicator& communicator() noexcept { return communicator_; }
  int rank() const noexcept { return communicator_.rank(); }
  int ranks() const noexcept { return communicator_.size(); }
  int zero() const noexcept { return zero_; }
  // The rank that owns store.parameters()[index]'s optimizer state (every rank at zero 0).
  int owner(std::size_t index) const noexcept { return owners_[index]; }
  bool owns(std::size_t index) const noexcept { return zero_ == 0 || owners_[index] == rank(); }

  // Before allocation: the rows this rank does not keep are allocated on demand (never, for
  // optimizer state; each step, for a zero 2 gradient).
  void shard_rows();
  // Zero 2: a block's gradients this rank does not own, allocated and zeroed before its first
  // backward of the step. Nothing at other stages.
  void prepare_gradients(int layer);
  // After a block's last backward of the step: its gradients summed over the ranks (to every rank
  // at zero 0 and 1, to the owner at zero 2, which frees the others).
  void reduce_gradients(int layer);
  // The gradients this rank holds (zero 2: those it owns).
  std::vector<TensorView> held_gradients() const;
  // The global squared gradient norm: each slot's sum of squares from its owner, added in slot order
  // (AdamW's own order, so the norm has the bits zero 0's step computes). `slots` are every
  // trained parameter's, in the store's order.
  double sum_of_squares(Ops& ops, std::span<const ParamSlot> slots);
  // The slots of the parameters this rank owns.
  std::vector<ParamSlot> owned(std::span<const ParamSlot> slots) const;
  // Zero 1 and 2, after the update: each owner's updated values to every rank.
  void share_updated_parameters();

  // Checkpoints. Rank 0 writes the one-process format: before a save, the owners send it the
  // optimizer state it does not keep (rank 0 holds it until release_gathered_state).
  void gather_state_to_root();
  void release_gathered_state();
  // Before a resume loads a checkpoint: every state row held; after, those of others freed.
  void hold_all_state();
  void release_others_state();

  // The mean over ranks of each rank's value (added in rank order), and the largest.
  double mean(double mine);
  int largest(int mine);

 private:
  std::vector<int> state_rows(std::size_t index) const;
  Communicator& communicator_;
  TensorStore& store_;
  int zero_ = 0;
  std::vector<int> owners_;  // per store.parameters() index; -1 for a frozen parameter
  std::vector<float> scratch_;
};

}  // namespace strata
