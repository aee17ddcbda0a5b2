#pragma once
// The step loop (docs/architecture.md, "The step"): the step's phase (from the phase controller,
// when there is one), then per micro batch blocks forward with hooks around each, the loss, and,
// unless the phase is predict, blocks backward in reverse with hooks, the precision check, step
// hooks and the optimizer. A predict step hands the update to the phase controller instead.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/manifest/update_mode.hpp"
#include "core/model/model.hpp"
#include "strata/memory_strategy.hpp"
#include "strata/optimizer.hpp"
#include "strata/phase_controller.hpp"
#include "strata/precision_policy.hpp"

namespace strata {

class DataParallel;

// Tokens and next-token targets for one micro batch, (B,T) each.
struct MicroBatch {
  std::span<const std::int32_t> inputs;
  std::span<const std::int32_t> targets;
};

struct ExecutorOptions {
  std::int64_t total_steps = 1;
  std::int64_t warmup_steps = 0;
  double lr = 3e-4;
  PhaseController* controller = nullptr;  // null: every step is a full step
  // How errors name each strategy, in manifest order ("[[strategy]] #1 'checkpoint'").
  std::vector<std::string> strategy_labels;
  UpdateMode update = UpdateMode::full;
  FusedClip fused_clip = FusedClip::previous;
  // Data parallel (core/distributed/data_parallel.hpp): the ranks' gradients are summed after each
  // block's last backward of the step, and the update is sharded by its ZeRO stage. Null: one rank.
  DataParallel* data_parallel = nullptr;
};

struct StepOutcome {
  double loss = 0.0;  // mean over micro batches
  OptimizerReport report;
  bool skipped = false;     // precision policy found non-finite gradients
  double loss_scale = 1.0;  // what the loss was multiplied by for backward
  Phase phase = Phase::full;
  bool rolled_back = false;        // a predict step's guardrail restored the phase-start weights
  double predictor_ms = 0.0;       // the phase controller's calls, device work included
  std::int64_t target_tokens = 0;  // the positions the loss is the mean over, every rank's
};

class Executor {
 public:
  Executor(Model& model, Optimizer& optimizer, PrecisionPolicy& precision, std::vector<MemoryStrategy*> strategies,
           ExecutorOptions options);

  // Calls every strategy's on_attach once, before the first step, then allocates the model's
  // persistent rows that are still unallocated (Allocation::deferred) where the strategies put them.
  void attach();
  // Hands the phase controller (if any) the trained parameters and the memory it asks for; after
  // attach(), before a resume restores its state.
  void attach_controller(PhaseControllerMemory& memory);
  // on_attach only, for `strata plan`: the table shows where rows would live. Under the fused
  // update the gradients are allocated on demand: allocate_persistent leaves them, and each
  // layer's are allocated when its backward starts.
  void attach_without_allocating();
  // One optimizer step over these micro batches (their count is train.micro_batches).
  StepOutcome train_step(std::int64_t step, std::span<const MicroBatch> micro_batches);
  // Forward and backward only: gradients of the mean loss, accumulated into the grad rows (which
  // the caller zeroes). Used by train_step and by gradient tests.
  double forward_backward(std::int64_t step, std::span<const MicroBatch> micro_batches, Phase phase);
  // Sum of per-position losses of the first `rows` sequences of a micro batch (forward only).
  double forward_loss_sum(const MicroBatch& batch, int rows);

  Model& model() noexcept { return model_; }
  // The fused update's clipping norm for the next step (fused_clip = "previous": the last step's
  // global gradient norm; none before the first step). Checkpoints keep it, so a resume clips as
  // the uninterrupted run does.
  std::optional<double> fused_clip_norm() const noexcept { return previous_grad_norm_; }
  void restore_fused_clip_norm(std::optional<double> norm) noexcept { previous_grad_norm_ = norm; }
  // Told where a step is: "forward" / "backward" / "update" of a block (layer -1: the embedding,
  // or the whole model's update) and "head", as it gets there. A memory timeline
  // (core/training/memory_timeline.hpp) places its samples with it.
  void observe_marks(std::function<void(std::string_view pass, int layer)> observer) {
    mark_observer_ = std::move(observer);
  }
  // Told when an update of rows that all live in host memory begins (true) and ends (false), so
  // that the plugins' services hand out the backend's host op table meanwhile
  // (HostServicesImpl::set_update_on_host; core/executor/host_update.cpp).
  void observe_host_updates(std::function<void(bool on_host)> observer) { host_update_observer_ = std::move(observer); }

 private:
  void mark(std::string_view pass, int layer) {
    if (mark_observer_) mark_observer_(pass, layer);
  }
  friend class ExecutorHookContext;
  enum class Hook { attach, before_forward, after_forward, before_backward, after_backward, before_step, after_step };
  void run_hooks(Hook hook, int layer, bool reverse);
  // A strategy dropping or evicting a block's activations; the other action on the same block by
  // another strategy in the same micro batch is refused, naming both.
  enum class ActivationAction { drop, evict };
  void claim_activations(int layer, ActivationAction action);
  void ensure_on_device(int layer, TensorGroup group);
  // Offloaded activations back on the device before a block's backward or recomputation (the
  // block's own, codes included, and its input, the output of the block below, whose other rows
  // may still be on their way), then its codes decoded (core/executor/activation_codes.cpp).
  void restore_activations(int layer);
  // After a block's forward that goes backward: its activations a codec takes become codes.
  void encode_activations(int layer);
  // "[[strategy]] #2 'offload'", as the manifest names it.
  std::string strategy_label(int strategy) const;
  // The embedding and every layer forward, with the forward hooks; not the head. Without
  // keep_activations (nothing goes backward), a layer's activations go once the next has run.
  void forward_layers(bool keep_activations);
  // The backward half of one micro batch, one per-block schedule (docs/architecture.md, "The
  // step"): the globals' gradients opened, the head's backward, then per block from the top: open,
  // backward, close; last the embedding's backward, which closes the globals.
  void backward_pass(float dloss, bool last_micro_batch);
  // Ready for a block's backward: its weights on the device (zero 3: the block below's gathered
  // meanwhile) and its gradients where backward writes them (zero 2: the owned ones allocated;
  // update per block: allocated and zeroed, its state on disk read in).
  void open_block(int layer);
  // After a block's backward, where the step's options say: reduce (data parallel, last micro
  // batch: summed across ranks on the communicator's thread; zero 3: gathered weights released),
  // then update (update per block: now, or after the next block's backward when the host runs it).
  void close_block(int layer, bool last_micro_batch);
  std::vector<ParamSlot> parameter_slots(std::optional<int> layer = std::nullopt);
  // The update (core/executor/update.cpp): one schedule for every placement of the rows, and the
  // one place the optimizer's entry points are called. How a call settles the step's lr, gradient
  // norm and clipping: inside step() (the whole model in one part), by the slots' own norm
  // (begin_step), or by a norm given (begin_step_with_norm).
  enum class Settle { in_step, own_norm, given_norm };
  static constexpr int kAllLayers = -3;  // a part that is the whole model
  OptimizerStepInfo step_info() const;
  void settle_update(Settle settle, std::span<const ParamSlot> slots, double clip_norm, OptimizerReport& report);
  // step() (Settle::in_step) or step_part() of `slots` (none when empty).
  void update_slots(Settle settle, std::span<ParamSlot> slots, OptimizerReport& report);
  // train.update = "full": after the whole backward, settled once, then updated in parts (the whole
  // model; a layer at a time when rows live on disk; this rank's share under ZeRO 1 and 2), each
  // part's weights published; a skipped step only publishes.
  void update_after_backward(bool skipped, OptimizerReport& report);
  // The fused update (core/executor/fused_update.cpp): blocks' gradients exist only from their
  // backward to their update; each block steps right after its backward, the globals after the
  // embedding's, and the report sums the blocks' norms into the step's.
  void begin_fused_block(int layer);
  void read_fused_state_from_disk(int layer);
  void fused_step_block(int layer);
  // Whether the fused update of `layer` waits for the next block's backward to be issued: its rows
  // live in host memory, so the host updates it while the device computes that backward.
  bool defers_fused_step(int layer);
  static constexpr int kNoDeferredStep = -2;  // below kGlobalParameters: no block waits
  void finish_fused_step(StepOutcome& outcome);
  std::vector<ControlledParameter> controlled_parameters();
  // The update on the host (core/executor/host_update.cpp), on the backend's host op table
  // (Backend::host_ops: the host's cores, the device's bits) instead of across the bus. Whether the
  // host runs the update of these slots: they all live in host memory, and the optimizer says it
  // can (SDK 9.10, Optimizer::can_update_on_host).
  bool updates_on_host(std::span<const ParamSlot> slots) const;
  static bool in_host_memory(std::span<const ParamSlot> slots);
  static bool in_host_memory(std::span<const TensorView> rows);
  // The table for an op over `rows`: the host's when they all live in host memory.
  Ops& ops_for(std::span<const TensorView> rows);
  // A layer whose optimizer state is off the device, for an optimizer the host may run: its rows of
  // `groups` still on the device start for host memory, to be updated there (one rank only).
  void gather_on_host(int layer, std::initializer_list<TensorGroup> groups);
  // The plugins' services and the store's rounding of masters use the host table from here on
  // (true) or no more (false).
  void set_host_update(bool on_host);
  // While one lives (made with on_host true), the update and the masters' rounding run on the
  // host table.
  class HostUpdateScope {
   public:
    HostUpdateScope(Executor& executor, bool on_host) : executor_(on_host ? &executor : nullptr) {
      if (executor_ != nullptr) executor_->set_host_update(true);
    }
    ~HostUpdateScope() {
      if (executor_ != nullptr) executor_->set_host_update(false);
    }
    HostUpdateScope(const HostUpdateScope&) = delete;
    HostUpdateScope& operator=(const HostUpdateScope&) = delete;

   private:
    Executor* executor_;
  };
  void full_update(std::int64_t step, std::span<const MicroBatch> micro_batches, StepOutcome& outcome);
  void predicted_update(std::int64_t step, std::span<const MicroBatch> micro_batches, StepOutcome& outcome);
  // Runs one controller call, adding its time (the device's included) to outcome.predictor_ms.
  template <typename Call>
  void timed_controller_call(StepOutcome& outcome, Call&& call);

  Model& model_;
  Optimizer& optimizer_;
  PrecisionPolicy& precision_;
  std::vector<MemoryStrategy*> strategies_;
  ExecutorOptions options_;
  std::int64_t step_ = 0;
  int micro_batch_ = 0;
  int micro_batches_ = 1;
  Phase phase_ = Phase::full;
  int current_strategy_ = -1;                 // the strategy whose hook runs now
  int forward_layer_ = -1;                    // the block whose forward ran last, until the next block's forward
  bool keep_activations_ = true;              // false in a forward pass that goes no backward
  std::vector<int> dropped_by_, evicted_by_;  // per block, this micro batch: which strategy, or -1
  std::function<void(std::string_view, int)> mark_observer_;
  std::function<void(bool)> host_update_observer_;
  bool update_per_block_ = false;          // train.update = "fused": each block updates as its backward closes
  int deferred_update_ = kNoDeferredStep;  // the block whose update waits for the next backward
  double fused_sum_of_squares_ = 0.0;      // this step's blocks' squared gradient norms so far
  std::int64_t last_target_tokens_ = 0;    // the last forward_backward's targets, every rank's
  OptimizerReport fused_report_;
  std::optional<double> previous_grad_norm_;
  // Per layer + 1 (the globals first): the optimizer state rows read in from disk for this step's
  // update, written back after it.
  std::vector<std::vector<int>> state_from_disk_;
};

}  // namespace strata
