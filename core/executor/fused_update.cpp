// The fused update (train.update = "fused"; docs/architecture.md, "The fused update"): each block
// is updated as soon as its backward has run, before the backward of the block below (a block whose
// rows live in host memory: once that backward is issued, so the host's update overlaps it), and its
// gradients are freed at once, so the full set of gradients never exists (LOMO's memory saving;
// Fuyou overlaps the same step with backward). The globals (embeddings, final norm, an untied head)
// are updated last, after the embedding's backward, since a tied head's gradient has two parts.
//
// The optimizer steps in parts (SDK 9.3: begin_step, step_part) over one block's slots at a time.
// Clipping cannot use the step's global norm, which exists only once every block has stepped:
// fused_clip = "previous" clips every block by the last step's global norm (SDK 9.4,
// begin_step_with_norm; the first step is not clipped), "per_block" clips each block by its own.
// A step cannot be skipped once blocks above have changed: non-finite gradients stop the run.
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/executor/executor.hpp"
#include "core/executor/hook_failed.hpp"

namespace strata {

namespace {

std::string block_name(int layer) {
  return layer == kGlobalParameters ? std::string("the global parameters") : "block " + std::to_string(layer);
}

}  // namespace

void Executor::begin_fused_block(int layer) {
  // The gradients exist from here to the update, zeroed, on the device (where backward writes
  // them; a strategy may move them before the update). The globals' start before the head's
  // backward and are complete after the embedding's.
  TensorStore& store = model_.store();
  const std::vector<int> grads = store.group_rows(layer, TensorGroup::grads);
  store.residency().begin_move_rows(grads, Home::device);  // unallocated: only the home changes
  for (int row : grads) store.residency().allocate(row, /*zero=*/true);
  // A block's state on disk is read in while its backward runs; the globals' once the last block
  // has updated (read_fused_state_from_disk), so that at most two layers' state is in memory.
  if (layer >= 0) read_fused_state_from_disk(layer);
}

void Executor::read_fused_state_from_disk(int layer) {
  TensorStore& store = model_.store();
  state_from_disk_.resize(static_cast<std::size_t>(model_.n_layer()) + 1);
  std::vector<int>& rows = state_from_disk_[static_cast<std::size_t>(layer + 1)];
  rows = store.rows_on_disk(layer, {TensorGroup::optimizer_state});  // the moments, the masters or both
  store.residency().begin_move_rows(rows, Home::host);
}

bool Executor::defers_fused_step(int layer) {
  // Data parallel sums a block's gradients before its update, in block order: not held back.
  if (options_.data_parallel != nullptr || layer < 0) return false;
  // Block weights kept on disk go back there as the next block's backward starts: held back, the
  // update would read them in again.
  const TensorStore& store = model_.store();
  for (int row : store.group_rows(layer, TensorGroup::weights))
    if (store.residency().kept_on_disk(row)) return false;
  return updates_on_host(parameter_slots(layer));  // homes only: moves in flight land in fused_step_block
}

void Executor::fused_step_block(int layer) {
  mark("update", layer);
  TensorStore& store = model_.store();
  std::vector<int> from_disk = std::move(state_from_disk_[static_cast<std::size_t>(layer + 1)]);
  // The globals' gradients and weights, which no backward hook sends, join offloaded state in host
  // memory for the host's update; the weights come back as the blocks' do, before the next forward.
  if (layer == kGlobalParameters) gather_on_host(layer, {TensorGroup::grads, TensorGroup::weights});
  for (TensorGroup group : {TensorGroup::weights, TensorGroup::grads, TensorGroup::optimizer_state})
    store.complete_moves(layer, group);
  // Weights a strategy keeps on disk and has sent back already are read in for the update.
  const std::vector<int> weights_in = store.residency().borrow_from_disk(store.group_rows(layer, TensorGroup::weights));
  from_disk.insert(from_disk.end(), weights_in.begin(), weights_in.end());
  store.drop_stale_weight_copies(layer);  // the update writes the block's weights
  std::vector<ParamSlot> slots = parameter_slots(layer);
  // Offloaded state: the host updates the block and rounds its masters (while the device computes
  // the next block's backward, when defers_fused_step held it back).
  const HostUpdateScope where(*this, updates_on_host(slots));
  if (!slots.empty()) {
    auto timer = model_.profiler().scope(ProfileKind::optimizer_step);
    std::vector<TensorView> grads;
    for (const ParamSlot& slot : slots) grads.push_back(slot.grad);
    PrecisionDecision decision;
    if (Status status = precision_.unscale_and_check(ops_for(grads), grads, decision); !status)
      throw HookFailed(status.message());
    if (decision.skip_step)
      throw std::runtime_error("step " + std::to_string(step_) + ": the gradients of " + block_name(layer) +
                               " are not finite, and the precision policy would skip the step; update = \"fused\" "
                               "cannot skip a step (it updates each block as soon as its gradients are complete), "
                               "so the run stops (saved checkpoints are untouched: resume from one with a lower lr, "
                               "or train with update = \"full\")");
    // Settled per block: by the last step's global norm (fused_clip = "previous") or its own.
    const Settle settle = options_.fused_clip == FusedClip::previous ? Settle::given_norm : Settle::own_norm;
    OptimizerReport report;
    settle_update(settle, slots, previous_grad_norm_.value_or(0.0), report);
    fused_sum_of_squares_ += report.grad_norm * report.grad_norm;
    fused_report_.lr = report.lr;
    update_slots(settle, slots, report);
  }
  store.publish_layer_weights(step_, layer);
  if (!from_disk.empty()) store.residency().return_to_disk(from_disk, !slots.empty());
  for (int row : store.group_rows(layer, TensorGroup::grads)) store.residency().release(row);
}

void Executor::finish_fused_step(StepOutcome& outcome) {
  outcome.report = fused_report_;
  outcome.report.grad_norm = std::sqrt(fused_sum_of_squares_);
  outcome.skipped = false;
  outcome.loss_scale = precision_.loss_scale();
  previous_grad_norm_ = outcome.report.grad_norm;
  model_.backend().synchronize();  // an op's failure surfaces here, not as a NaN loss
  if (!std::isfinite(outcome.loss))
    throw std::runtime_error("training diverged: the loss is " + std::to_string(outcome.loss) + " at step " +
                             std::to_string(step_) + " (update = \"fused\": every block is already updated)");
  // The optimizer has run block by block: no before_step hook (nothing is left for it to prepare);
  // after_step hooks see the updated weights, as after a full update.
  model_.store().residency().complete_all_moves();
  run_hooks(Hook::after_step, -1, true);
}

}  // namespace strata
