// The update: one schedule for every placement of the rows, and the one place the optimizer's
// entry points are called (docs/architecture.md, "The update").
//
// An update settles what the whole step shares (the schedule's lr, the gradient norm and its
// clipping), then updates the parameters in parts, each where its rows live, and publishes each
// part's weights (bf16 or quantized weights rounded from their masters). What used to be separate
// paths are properties of the schedule:
//   - the parts: the whole model in one (rows in memory), one layer at a time (state on disk: each
//     layer's read in while the one before updates, written back behind it), this rank's share
//     (ZeRO 1 and 2), or one block right after its backward (the fused update,
//     core/executor/fused_update.cpp);
//   - the settling: inside step() when the whole model is one part; begin_step over every gradient
//     before the parts (state on disk); begin_step_with_norm by the ranks' global norm (ZeRO); per
//     block by its own norm or the last step's (the fused update's fused_clip);
//   - where each part runs: on the host's cores when all its rows live in host memory
//     (core/executor/host_update.cpp), else on the device.
// A skipped step (non-finite gradients, precision policy's decision) settles and updates nothing
// but still publishes, as a resume from its checkpoint would.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/distributed/data_parallel.hpp"
#include "core/executor/executor.hpp"
#include "core/executor/hook_failed.hpp"

namespace strata {

OptimizerStepInfo Executor::step_info() const {
  return {step_, options_.total_steps, options_.warmup_steps, options_.lr};
}

void Executor::settle_update(Settle settle, std::span<const ParamSlot> slots, double clip_norm,
                             OptimizerReport& report) {
  const OptimizerStepInfo info = step_info();
  switch (settle) {
    case Settle::in_step: return;  // step() settles and updates in one call
    case Settle::own_norm:
      if (Status status = optimizer_.begin_step(info, slots, report); !status) throw HookFailed(status.message());
      return;
    case Settle::given_norm:
      if (Status status = optimizer_.begin_step_with_norm(info, slots, clip_norm, report); !status)
        throw HookFailed(status.message());
      return;
  }
}

void Executor::update_slots(Settle settle, std::span<ParamSlot> slots, OptimizerReport& report) {
  const OptimizerStepInfo info = step_info();
  if (settle == Settle::in_step) {
    if (Status status = optimizer_.step(info, slots, report); !status) throw HookFailed(status.message());
    return;
  }
  if (slots.empty()) return;
  if (Status status = optimizer_.step_part(info, slots); !status) throw HookFailed(status.message());
}

void Executor::update_after_backward(bool skipped, OptimizerReport& report) {
  TensorStore& store = model_.store();
  DataParallel* const parallel = options_.data_parallel;
  const bool sharded = parallel != nullptr && parallel->zero() >= 1;
  // The parts: every layer at once, or one at a time when rows live on disk. kAllLayers: the
  // whole model in one part.
  std::vector<int> parts{kAllLayers};
  if (!sharded && store.residency().any_on_disk()) {
    parts = {kGlobalParameters};
    for (int layer = 0; layer < model_.n_layer(); ++layer) parts.push_back(layer);
  }
  const bool one_part = parts.size() == 1;
  // Settled inside step() when the whole model is one part; before the parts otherwise: by every
  // gradient's norm (begin_step sees them all, its state on disk read as empty views) or, under
  // ZeRO, by the norm over every rank's gradients.
  const Settle settle = sharded ? Settle::given_norm : one_part ? Settle::in_step : Settle::own_norm;
  const std::vector<ParamSlot> all = parameter_slots();  // ZeRO: others' state (and at zero 2 gradients) empty
  std::vector<ParamSlot> owned = sharded ? parallel->owned(all) : std::vector<ParamSlot>{};
  if (!skipped && settle != Settle::in_step) {
    auto timer = model_.profiler().scope(ProfileKind::optimizer_step);
    const std::span<const ParamSlot> settled = sharded ? owned : all;
    const HostUpdateScope where(*this, updates_on_host(settled));
    const double norm = sharded ? std::sqrt(parallel->sum_of_squares(model_.backend().ops(), all)) : 0.0;
    settle_update(settle, settled, norm, report);
    if (sharded) report.grad_norm = norm;
  }
  // Per layer on disk: its optimizer state (the moments, the masters or both) and, when a strategy
  // keeps them there, the block's weights, which the update rewrites.
  std::vector<std::vector<int>> from_disk(parts.size());
  if (!one_part)
    for (std::size_t i = 0; i < parts.size(); ++i)
      from_disk[i] = store.rows_on_disk(parts[i], {TensorGroup::optimizer_state, TensorGroup::weights});
  const auto read_in = [&](std::size_t i) {
    if (i < parts.size() && !from_disk[i].empty()) store.residency().begin_move_rows(from_disk[i], Home::host);
  };
  read_in(0);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const int layer = parts[i];
    if (!one_part) {
      // The part before has been written back (the tier's transfers run in order, so the write
      // ends before the next read starts anyway): at most two layers' state is in host memory.
      if (i > 0) store.residency().complete_rows(from_disk[i - 1]);
      read_in(i + 1);  // the next layer's state arrives while this one updates
      store.residency().complete_rows(from_disk[i]);
      store.complete_moves(layer, TensorGroup::optimizer_state);
      store.drop_stale_weight_copies(layer);  // the update (or, skipped, the publish below) rewrites them
    }
    std::vector<ParamSlot> slots = sharded ? std::move(owned) : one_part ? all : parameter_slots(layer);
    const HostUpdateScope where(*this, !skipped && updates_on_host(slots));  // the publish too
    if (!skipped) {
      auto timer = model_.profiler().scope(ProfileKind::optimizer_step);
      update_slots(settle, slots, report);
    }
    // bf16 weights: round the updated masters. A skipped step rounds its unchanged masters again,
    // as a resume from its checkpoint does, so a rounding that depends on the step resumes bitwise.
    if (layer == kAllLayers)
      store.publish_weights(step_);  // under ZeRO, the masters this rank keeps
    else
      store.publish_layer_weights(step_, layer);
    // Written back on the tier's thread. The next layer waits for it before its own read goes
    // out (two layers' state in memory at most), so only the last layer's write overlaps compute:
    // the next step's forward. A skipped step's state is as it was; its weights were published
    // again, which a rounding of the precision policy's own may change (it depends on the step),
    // so weights go back written.
    const bool weights_read = std::any_of(from_disk[i].begin(), from_disk[i].end(), [&](int row) {
      return store.table().row(row).group == TensorGroup::weights;
    });
    if (!from_disk[i].empty()) store.residency().return_to_disk(from_disk[i], !skipped || weights_read);
  }
  if (sharded) parallel->share_updated_parameters();  // the owners' values to every rank
}

}  // namespace strata
