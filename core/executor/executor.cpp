#include "core/executor/executor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/data/dataset.hpp"
#include "core/device/memory_limit_exceeded.hpp"
#include "core/distributed/data_parallel.hpp"
#include "core/executor/hook_failed.hpp"

namespace strata {

// The executor's side of the SDK's HookContext: what a strategy may see and do at one hook.
class ExecutorHookContext final : public HookContext {
 public:
  ExecutorHookContext(Executor& executor, int layer) : executor_(executor), layer_(layer) {}

  int layer() const noexcept override { return layer_; }
  int n_layer() const noexcept override { return executor_.model_.n_layer(); }
  Phase phase() const noexcept override { return executor_.phase_; }
  std::int64_t step() const noexcept override { return executor_.step_; }
  int micro_batch() const noexcept override { return executor_.micro_batch_; }

  int micro_batches() const noexcept override { return executor_.micro_batches_; }

  Status fetch(int layer, TensorGroup group) noexcept override { return move(layer, group, Home::device, false); }
  Status evict(int layer, TensorGroup group) noexcept override { return move(layer, group, Home::host, false); }
  Status fetch_async(int layer, TensorGroup group) noexcept override { return move(layer, group, Home::device, true); }
  Status evict_async(int layer, TensorGroup group) noexcept override { return move(layer, group, Home::host, true); }
  Status evict_to_disk(int layer, TensorGroup group) noexcept override {
    return guarded([&] {
      if (layer != kGlobalParameters) check_layer(layer);
      if (group != TensorGroup::optimizer_state && group != TensorGroup::masters && group != TensorGroup::weights)
        throw std::invalid_argument(std::string("only optimizer state, masters and a block's weights may live on "
                                                "disk, not ") +
                                    std::string(group_name(group)));
      if (group == TensorGroup::weights && layer == kGlobalParameters)
        throw std::invalid_argument(
            "the global parameters' weights (embeddings, final norm, head) stay in memory: every pass reads them");
      if (!executor_.optimizer_.steps_in_parts())
        throw std::invalid_argument(
            "the optimizer steps every parameter at once (it has no step in parts, SDK 9.3), so its state cannot "
            "live on disk");
      TensorStore& store = executor_.model_.store();
      store.residency().make_resident(store.group_rows(layer, group), Home::disk, true);
    });
  }
  Status read_from_disk_async(int layer, TensorGroup group) noexcept override {
    return guarded([&] {
      if (layer != kGlobalParameters) check_layer(layer);
      TensorStore& store = executor_.model_.store();
      store.residency().read_from_disk(store.group_rows(layer, group));
    });
  }
  Status write_to_disk_async(int layer, TensorGroup group) noexcept override {
    return guarded([&] {
      if (layer != kGlobalParameters) check_layer(layer);
      TensorStore& store = executor_.model_.store();
      store.residency().write_to_disk(store.group_rows(layer, group));
    });
  }
  Status wait_transfers() noexcept override {
    return guarded([&] { executor_.model_.store().residency().complete_all_moves(); });
  }
  Status wait_for(int layer, TensorGroup group) noexcept override {
    return guarded([&] {
      if (layer != kGlobalParameters) check_layer(layer);
      executor_.model_.store().complete_moves(layer, group);
      executor_.model_.store().residency().collect_finished_moves();  // everything issued earlier has landed too
    });
  }
  Residence residence(int layer, TensorGroup group) const noexcept override {
    if (layer < kGlobalParameters || layer >= n_layer()) return Residence::absent;
    return executor_.model_.store().residence(layer, group);
  }
  Status drop_activations(int layer) noexcept override {
    return guarded([&] {
      check_layer(layer);
      executor_.claim_activations(layer, Executor::ActivationAction::drop);
      executor_.model_.free_layer_activations(layer, true);
    });
  }
  Status drop_logits() noexcept override {
    return guarded([&] { executor_.model_.set_logits_mode(LogitsMode::recompute); });
  }
  Status recompute_activations(int layer) noexcept override {
    return guarded([&] {
      check_layer(layer);
      Model& model = executor_.model_;
      executor_.restore_activations(layer);  // the input, what a partial drop kept, codes decoded
      if (model.layer_activations_present(layer)) return;
      if (layer > 0 && !model.layer_output_kept(layer - 1))
        throw std::runtime_error("cannot recompute layer " + std::to_string(layer) + ": its input is not kept");
      executor_.ensure_on_device(layer, TensorGroup::weights);
      if (model.only_partial_activations_missing(layer)) {
        model.recompute_missing_activations(layer);
        return;
      }
      model.allocate_layer_activations(layer);
      model.recompute_layer(layer);
    });
  }
  TensorView tensor(std::string_view name) noexcept override {
    TensorStore& store = executor_.model_.store();
    const std::optional<int> row = store.table().find(name);
    if (!row) return {};
    // A tensor being moved is where it goes once its copy lands: let it land, so the view's memory
    // space is true.
    if (Status status = guarded([&] { store.residency().complete_rows({*row}); }); !status) return {};
    return store.view(*row);
  }
  Status drop_activation_tensors(int layer, std::span<const std::string_view> names) noexcept override {
    return guarded([&] {
      check_layer(layer);
      Model& model = executor_.model_;
      const TensorTable& table = model.store().table();
      std::vector<int> kinds;
      for (std::string_view name : names) {
        const std::optional<int> row = table.find(name);
        const int kind = row && table.row(*row).layer == layer ? model.activation_kind(layer, *row) : -1;
        if (kind < 0 || model.recompute_op(kind).empty()) {
          std::string alone;
          for (const TensorInfo& tensor : tensors(layer))
            if (!tensor.recomputed_by.empty()) alone += (alone.empty() ? "" : ", ") + std::string(tensor.name);
          throw std::invalid_argument("'" + std::string(name) + "' is not an activation of layer " +
                                      std::to_string(layer) + " that is recomputed alone (those are: " + alone +
                                      "; drop_activations drops the whole block)");
        }
        kinds.push_back(kind);
      }
      executor_.claim_activations(layer, Executor::ActivationAction::drop);
      model.free_activation_kinds(layer, kinds);
    });
  }
  std::span<const TensorInfo> tensors(int layer) noexcept override {
    if (layer < kGlobalParameters || layer >= n_layer()) return {};
    // One list per layer for the context's life, so an earlier span stays valid during the hook.
    std::vector<TensorInfo>& listed = listed_[layer];
    listed.clear();
    const Model& model = executor_.model_;
    const TensorStore& store = model.store();
    const std::vector<TensorRow>& rows = store.table().rows();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const TensorRow& r = rows[i];
      if (r.layer != layer) continue;
      const int row = static_cast<int>(i);
      const Residence where = store.residency().allocated(row) ? residence_of(r.home) : Residence::absent;
      const int kind = layer >= 0 && r.group == TensorGroup::activations ? model.activation_kind(layer, row) : -1;
      const std::string_view recomputed_by = kind >= 0 ? std::string_view(model.recompute_op(kind)) : "";
      listed.push_back({r.name, r.layer, r.shape, r.element, r.group, r.category, where, r.bytes(), recomputed_by});
    }
    return listed;
  }
  bool has(Service service) const noexcept override {
    switch (service) {
      case Service::memory:
      case Service::update_on_host: return true;
      case Service::disk_tier: return executor_.model_.store().residency().disk_tier() != nullptr;
      case Service::activation_codecs: return true;
      case Service::count: break;
    }
    return false;  // a service of a later minor
  }
  MemorySnapshot memory() const noexcept override {
    Backend& device = executor_.model_.backend();
    const ArenaStats stats = device.device_memory().stats();
    return MemorySnapshot{stats.live, stats.peak, stats.limit, device.host_memory().live_total()};
  }

 private:
  Status move(int layer, TensorGroup group, Home to, bool async) noexcept {
    return guarded([&] {
      if (layer != kGlobalParameters) check_layer(layer);
      TensorStore& store = executor_.model_.store();
      if (group == TensorGroup::activations) {
        if (layer == kGlobalParameters) throw std::invalid_argument("activations belong to blocks: name a layer");
        // A pass that goes no backward (evaluation, a predict step) frees each block's
        // activations once the next block has read them: there is nothing to keep on the host.
        if (!executor_.keep_activations_) return;
        if (to == Home::host) executor_.claim_activations(layer, Executor::ActivationAction::evict);
        // The next block's forward still reads this block's output: it stays until then.
        std::vector<int> rows = executor_.model_.layer_held_rows(layer);
        if (to == Home::host && layer == executor_.forward_layer_)
          std::erase(rows, executor_.model_.layer_output_row(layer));
        store.residency().make_resident(rows, to, !async);
        return;
      }
      store.residency().make_resident(store.group_rows(layer, group), to, !async);
    });
  }
  void check_layer(int layer) const {
    if (layer < 0 || layer >= n_layer())
      throw std::out_of_range("layer " + std::to_string(layer) + " is outside [0, " + std::to_string(n_layer()) + ")");
  }
  Executor& executor_;
  int layer_;
  std::map<int, std::vector<TensorInfo>> listed_;  // what tensors() returned, per layer
};

Executor::Executor(Model& model, Optimizer& optimizer, PrecisionPolicy& precision,
                   std::vector<MemoryStrategy*> strategies, ExecutorOptions options)
    : model_(model),
      optimizer_(optimizer),
      precision_(precision),
      strategies_(std::move(strategies)),
      options_(std::move(options)),
      dropped_by_(static_cast<std::size_t>(model.n_layer()), -1),
      evicted_by_(static_cast<std::size_t>(model.n_layer()), -1) {}

void Executor::attach() {
  attach_without_allocating();
  model_.store().residency().allocate_persistent();
}

void Executor::attach_without_allocating() {
  run_hooks(Hook::attach, -1, false);
  if (options_.update == UpdateMode::fused)
    for (int layer = kGlobalParameters; layer < model_.n_layer(); ++layer)
      model_.store().residency().allocate_on_demand(model_.store().group_rows(layer, TensorGroup::grads));
}

void Executor::run_hooks(Hook hook, int layer, bool reverse) {
  model_.store()
      .residency()
      .collect_finished_moves();  // frees the sources of copies that landed, so memory returns promptly
  ExecutorHookContext context(*this, layer);
  const std::size_t count = strategies_.size();
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t index = reverse ? count - 1 - i : i;
    MemoryStrategy& strategy = *strategies_[index];
    current_strategy_ = static_cast<int>(index);
    // Strategies from a stack are wrapped (guarded_plugins.hpp): their errors name the plugin,
    // the hook and the layer.
    Status status;
    switch (hook) {
      case Hook::attach: status = strategy.on_attach(context); break;
      case Hook::before_forward: status = strategy.before_forward(context); break;
      case Hook::after_forward: status = strategy.after_forward(context); break;
      case Hook::before_backward: status = strategy.before_backward(context); break;
      case Hook::after_backward: status = strategy.after_backward(context); break;
      case Hook::before_step: status = strategy.before_step(context); break;
      case Hook::after_step: status = strategy.after_step(context); break;
    }
    current_strategy_ = -1;
    if (!status) throw HookFailed(status.message());
  }
}

void Executor::claim_activations(int layer, ActivationAction action) {
  if (current_strategy_ < 0) return;  // the executor's own calls
  std::vector<int>& claims = action == ActivationAction::drop ? dropped_by_ : evicted_by_;
  const std::vector<int>& other = action == ActivationAction::drop ? evicted_by_ : dropped_by_;
  const std::size_t index = static_cast<std::size_t>(layer);
  claims[index] = current_strategy_;
  if (other[index] < 0 || other[index] == current_strategy_) return;  // one strategy may do both
  const auto label = [&](int strategy) { return strategy_label(strategy); };
  const int dropper = action == ActivationAction::drop ? current_strategy_ : other[index];
  const int evicter = action == ActivationAction::drop ? other[index] : current_strategy_;
  throw std::invalid_argument("the activations of layer " + std::to_string(layer) + " are dropped by " +
                              label(dropper) + " and moved to the host by " + label(evicter) +
                              ": a block's activations are either recomputed or offloaded; give the layer to one "
                              "strategy");
}

void Executor::ensure_on_device(int layer, TensorGroup group) {
  // Zero 3: the layer's weights come from their owners first (once, until released).
  if (group == TensorGroup::weights && options_.data_parallel != nullptr) options_.data_parallel->gather_weights(layer);
  TensorStore& store = model_.store();
  store.complete_moves(layer, group);
  // Weights a strategy left on the host, or a block's kept on disk that no strategy brought in:
  // brought in now, and waited for.
  const Residence where = store.residence(layer, group);
  if (where == Residence::host || where == Residence::disk)
    store.residency().make_resident(store.group_rows(layer, group), Home::device, true);
}

void Executor::forward_layers(bool keep_activations) {
  const int L = model_.n_layer();
  mark("forward", -1);
  ensure_on_device(kGlobalParameters, TensorGroup::weights);
  DataParallel* const parallel = options_.data_parallel;
  if (parallel != nullptr) parallel->prefetch_weights(0);  // zero 3: block 0's come during the embedding
  model_.embed_forward();
  std::fill(dropped_by_.begin(), dropped_by_.end(), -1);
  std::fill(evicted_by_.begin(), evicted_by_.end(), -1);
  keep_activations_ = keep_activations;
  for (int l = 0; l < L; ++l) {
    mark("forward", l);
    run_hooks(Hook::before_forward, l, false);
    ensure_on_device(l, TensorGroup::weights);
    if (parallel != nullptr && l + 1 < L) parallel->prefetch_weights(l + 1);  // zero 3: during this block
    model_.allocate_layer_activations(l);
    model_.layer_forward(l);
    forward_layer_ = l;
    if (keep_activations) encode_activations(l);  // before the hooks, which then see the codes
    run_hooks(Hook::after_forward, l, false);
    if (parallel != nullptr) parallel->release_weights(l);  // zero 3
    if (!keep_activations && l > 0) model_.free_layer_activations(l - 1, false);
  }
  forward_layer_ = -1;  // no hook runs before the head reads the last block's output
}

double Executor::forward_backward(std::int64_t step, std::span<const MicroBatch> micro_batches, Phase phase) {
  step_ = step;
  phase_ = phase;
  precision_.begin_step(phase);  // the phase's loss scale and compute
  const std::int64_t positions = static_cast<std::int64_t>(model_.batch()) * model_.seq_len();
  // Data parallel: this rank's micro batches are those from rank x count of the step's
  // ranks x count, and the loss is the mean over all of them.
  DataParallel* const parallel = options_.data_parallel;
  const std::uint64_t ranks = parallel != nullptr ? static_cast<std::uint64_t>(parallel->ranks()) : 1;
  const std::uint64_t first_micro_batch = parallel != nullptr ? parallel->rank() * micro_batches.size() : 0;
  // The loss is the mean over the step's targets, every micro batch's on every rank, counted before
  // the backward so that accumulation and data parallel equal the big batch. Without a loss mask
  // every position is a target: the count is positions x micro batches x ranks, the same double as
  // their product, and the loss's factor below is exactly 1. A step without a target (a window of
  // prompt alone) has no gradient: its count stands at 1, its loss at 0.
  const std::int64_t all_positions = positions * static_cast<std::int64_t>(micro_batches.size() * ranks);
  std::int64_t targets = 0;
  for (const MicroBatch& batch : micro_batches) targets += target_count(batch.targets);
  if (parallel != nullptr) targets = parallel->total(targets);
  last_target_tokens_ = targets;
  const double loss_denominator = static_cast<double>(std::max<std::int64_t>(targets, 1));
  // Mean over every target of every micro batch, times the precision policy's loss scale.
  const auto dloss = static_cast<float>(precision_.loss_scale() / loss_denominator);
  double loss_sum = 0.0;
  micro_batches_ = static_cast<int>(micro_batches.size());
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    micro_batch_ = static_cast<int>(m);
    model_.begin_micro_batch(micro_batches[m].inputs, micro_batches[m].targets);
    // A number unique to this micro batch in the run, the same on resume and on recomputation.
    model_.set_pass(step, static_cast<int>(m),
                    {static_cast<std::uint64_t>(step) * micro_batches.size() * ranks + first_micro_batch + m,
                     phase_needs_gradients(phase)});
    forward_layers(phase_needs_gradients(phase));  // nothing goes backward in a predict step
    mark("head", -1);
    ensure_on_device(kGlobalParameters, TensorGroup::weights);
    // Zero 3: the last block's weights come back for its backward during the head's.
    if (parallel != nullptr && phase_needs_gradients(phase)) parallel->prefetch_weights(model_.n_layer() - 1);
    // A non-finite loss goes on into backward: its gradients are non-finite too, and the precision
    // policy decides (skip_nonfinite) what the step does.
    loss_sum += model_.head_forward();
    if (phase_needs_gradients(phase)) backward_pass(dloss, m + 1 == micro_batches.size());
    if (parallel != nullptr) parallel->release_weights(kGlobalParameters);  // zero 3
    model_.end_micro_batch();
  }
  const double loss = loss_sum / static_cast<double>(micro_batches.size());
  // Each pass's loss is its mean over all its positions (masked ones add 0): rescaled to the targets'.
  return (parallel != nullptr ? parallel->mean(loss) : loss) * (static_cast<double>(all_positions) / loss_denominator);
}

// The per-block schedule: every part of the model (the head's and the embedding's gradients
// are the global parameters', then each block from the top) is opened, goes backward, then is
// closed: reduced and updated where and when the step's options say.
void Executor::backward_pass(float dloss, bool last_micro_batch) {
  open_block(kGlobalParameters);
  model_.head_backward(dloss);
  for (int l = model_.n_layer() - 1; l >= 0; --l) {
    mark("backward", l);
    run_hooks(Hook::before_backward, l, true);
    open_block(l);
    restore_activations(l);
    if (!model_.layer_activations_present(l)) {
      ExecutorHookContext context(*this, l);
      if (Status status = context.recompute_activations(l); !status) throw HookFailed(status.message());
    }
    model_.layer_backward(l);
    model_.free_layer_activations(l, false);
    run_hooks(Hook::after_backward, l, true);
    close_block(l, last_micro_batch);
  }
  ensure_on_device(kGlobalParameters, TensorGroup::grads);
  if (update_per_block_) read_fused_state_from_disk(kGlobalParameters);
  mark("backward", -1);
  model_.embed_backward();
  close_block(kGlobalParameters, last_micro_batch);
}

void Executor::open_block(int layer) {
  DataParallel* const parallel = options_.data_parallel;
  if (layer != kGlobalParameters) {
    ensure_on_device(layer, TensorGroup::weights);
    if (parallel != nullptr && layer > 0) parallel->prefetch_weights(layer - 1);  // zero 3: during this block
  }
  if (parallel != nullptr) parallel->prepare_gradients(layer);  // zero 2: allocate the owned ones
  ensure_on_device(layer, TensorGroup::grads);
  if (update_per_block_) begin_fused_block(layer);
}

void Executor::close_block(int layer, bool last_micro_batch) {
  // Reduce: the sums run on the communicator's thread while the blocks below go backward.
  if (DataParallel* const parallel = options_.data_parallel; parallel != nullptr) {
    if (last_micro_batch) parallel->reduce_gradients(layer);
    if (layer != kGlobalParameters) parallel->release_weights(layer);  // zero 3
    if (update_per_block_) parallel->finish_reductions();              // the update reads the sums at once
  }
  if (!update_per_block_) return;  // updated after the whole backward (update_after_backward)
  // Update: a block whose rows live in host memory is updated by the host once the next block's
  // backward is issued, so the two overlap (ZeRO-Offload's CPU update); the order changes no
  // value, since a block's backward reads no weight of the blocks above it.
  if (deferred_update_ != kNoDeferredStep) fused_step_block(std::exchange(deferred_update_, kNoDeferredStep));
  if (defers_fused_step(layer))
    deferred_update_ = layer;
  else
    fused_step_block(layer);
}

std::vector<ParamSlot> Executor::parameter_slots(std::optional<int> layer) {
  std::vector<ParamSlot> slots;
  slots.reserve(model_.parameters().size());
  for (const ParameterRows& rows : model_.parameters()) {
    if (rows.grad < 0) continue;  // frozen: the optimizer never sees it
    if (layer && rows.layer != *layer) continue;
    const TensorStore& store = model_.store();
    ParamSlot slot;
    slot.name = rows.name;
    slot.layer = rows.layer;
    slot.kind = rows.kind;
    slot.shape = store.table().row(rows.param).shape;
    slot.layout = rows.layout;
    slot.count = store.table().row(rows.param).elements();
    slot.decay = rows.decay;
    slot.param = store.values(rows);
    slot.grad = store.view(rows.grad);
    for (std::size_t s = 0; s < rows.state.size(); ++s)
      if (rows.state[s] >= 0) slot.state[s] = store.view(rows.state[s]);
    slots.push_back(slot);
  }
  return slots;
}

std::vector<ControlledParameter> Executor::controlled_parameters() {
  std::vector<ControlledParameter> parameters;
  for (const ParamSlot& slot : parameter_slots()) parameters.push_back({slot.name, slot.layer, slot.param, slot.state});
  return parameters;
}

void Executor::attach_controller(PhaseControllerMemory& memory) {
  if (options_.controller == nullptr) return;
  const std::vector<ControlledParameter> parameters = controlled_parameters();
  if (Status status = options_.controller->attach(parameters, memory); !status) throw HookFailed(status.message());
}

template <typename Call>
void Executor::timed_controller_call(StepOutcome& outcome, Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  const Status status = call();
  model_.backend().synchronize();  // the controller's ops are its time too
  outcome.predictor_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!status) throw HookFailed(status.message());
}

StepOutcome Executor::train_step(std::int64_t step, std::span<const MicroBatch> micro_batches) {
  StepOutcome outcome;
  outcome.phase = Phase::full;
  PhaseController* controller = options_.controller;
  if (controller != nullptr)
    timed_controller_call(outcome, [&] { return controller->choose_phase(step, outcome.phase); });
  if (phase_needs_gradients(outcome.phase))
    full_update(step, micro_batches, outcome);
  else
    predicted_update(step, micro_batches, outcome);
  outcome.target_tokens = last_target_tokens_;
  if (controller != nullptr) {
    const StepObservation observed{step,           options_.total_steps,     outcome.phase,
                                   outcome.loss,   outcome.report.grad_norm, outcome.report.lr,
                                   outcome.skipped};
    const std::vector<ControlledParameter> parameters = controlled_parameters();
    timed_controller_call(outcome, [&] { return controller->observe(observed, parameters); });
  }
  return outcome;
}

void Executor::full_update(std::int64_t step, std::span<const MicroBatch> micro_batches, StepOutcome& outcome) {
  TensorStore& store = model_.store();
  store.zero_grads();
  if (options_.update == UpdateMode::fused) {
    update_per_block_ = true;
    fused_sum_of_squares_ = 0.0;
    deferred_update_ = kNoDeferredStep;
    try {
      outcome.loss = forward_backward(step, micro_batches, outcome.phase);
    } catch (...) {
      update_per_block_ = false;
      throw;
    }
    update_per_block_ = false;
    finish_fused_step(outcome);
    return;
  }
  outcome.loss = forward_backward(step, micro_batches, outcome.phase);
  mark("update", -1);
  DataParallel* const parallel = options_.data_parallel;
  if (parallel != nullptr) parallel->finish_reductions();
  // The globals' gradients join offloaded state (the blocks' left after their backward), so the
  // precision check reads every gradient in host memory, on the host.
  gather_on_host(kGlobalParameters, {TensorGroup::grads});
  store.residency().complete_all_moves();  // the precision check and the optimizer read every gradient

  std::vector<TensorView> grads;
  if (parallel != nullptr) {
    grads = parallel->held_gradients();  // zero 2: the owned ones
  } else {
    for (const ParameterRows& rows : model_.parameters())
      if (rows.grad >= 0) grads.push_back(store.view(rows.grad));
  }
  PrecisionDecision decision;
  if (Status status = precision_.unscale_and_check(ops_for(grads), grads, decision); !status)
    throw HookFailed(status.message());
  // Zero 2: each rank checked its own gradients; one rank's non-finite gradient skips every rank's step.
  if (parallel != nullptr && parallel->zero() >= 2) decision.skip_step = parallel->largest(decision.skip_step) != 0;
  outcome.skipped = decision.skip_step;
  outcome.loss_scale = decision.loss_scale;
  // A failed op (a GPU error, a workspace over the budget) reads back as a NaN loss: report the
  // failure itself before judging the loss. The reads above already waited for the device.
  model_.backend().synchronize();
  if (!std::isfinite(outcome.loss) && !outcome.skipped)
    throw std::runtime_error("training diverged: the loss is " + std::to_string(outcome.loss) + " at step " +
                             std::to_string(step) + ", and the precision policy did not skip the step");

  run_hooks(Hook::before_step, -1, false);
  store.residency().complete_all_moves();  // the optimizer writes where the strategies put the tensors
  store.drop_stale_weight_copies();
  update_after_backward(outcome.skipped, outcome.report);
  run_hooks(Hook::after_step, -1, true);
}

// Forward only: no gradient is computed and the optimizer does not run; the controller moves the
// weights (or puts them back) through ops.
void Executor::predicted_update(std::int64_t step, std::span<const MicroBatch> micro_batches, StepOutcome& outcome) {
  TensorStore& store = model_.store();
  outcome.loss = forward_backward(step, micro_batches, outcome.phase);
  mark("update", -1);
  outcome.loss_scale = 1.0;
  model_.backend().synchronize();  // an op's failure surfaces here, not as a NaN loss
  run_hooks(Hook::before_step, -1, false);
  store.residency().complete_all_moves();  // the controller writes where the strategies put the tensors
  store.drop_stale_weight_copies();
  const StepObservation observed{step, options_.total_steps, outcome.phase, outcome.loss, 0.0, 0.0, false};
  const std::vector<ControlledParameter> parameters = controlled_parameters();
  PredictOutcome predicted;
  timed_controller_call(outcome, [&] { return options_.controller->predict(observed, parameters, predicted); });
  outcome.rolled_back = predicted.rolled_back;
  // A non-finite forward loss the controller answered with an update (not a rollback) would carry
  // on from broken weights.
  if (!std::isfinite(outcome.loss) && !outcome.rolled_back)
    throw std::runtime_error("training diverged: the loss is " + std::to_string(outcome.loss) + " at predict step " +
                             std::to_string(step) + ", and the phase controller did not roll back");
  store.publish_weights(step);  // bf16 or quantized weights: round the moved masters
  run_hooks(Hook::after_step, -1, true);
}

double Executor::forward_loss_sum(const MicroBatch& batch, int rows) {
  precision_.begin_step(Phase::full);  // an evaluation computes as full steps do
  model_.begin_micro_batch(batch.inputs, batch.targets);
  model_.set_pass(step_, 0, {0, false});  // no dropout
  // Forward hooks run here too, so a strategy that bounds residency bounds it during evaluation;
  // nothing goes backward here.
  forward_layers(false);
  model_.head_forward();
  const double sum = model_.loss_sum(rows);
  if (options_.data_parallel != nullptr) options_.data_parallel->release_weights(kGlobalParameters);  // zero 3
  model_.end_micro_batch();
  return sum;
}

}  // namespace strata
