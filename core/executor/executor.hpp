#pragma once
// The step loop of DESIGN.md §2: per micro batch, blocks forward with hooks around each, the loss,
// blocks backward in reverse with hooks, then precision check, step hooks and the optimizer.
#include <cstdint>
#include <span>
#include <vector>

#include "core/model/model.hpp"
#include "strata/memory_strategy.hpp"
#include "strata/optimizer.hpp"
#include "strata/precision_policy.hpp"

namespace strata {

// Tokens and next-token targets for one micro batch, (B,T) each.
struct MicroBatch {
  std::span<const std::int32_t> inputs;
  std::span<const std::int32_t> targets;
};

struct ExecutorOptions {
  std::int64_t total_steps = 1;
  std::int64_t warmup_steps = 0;
  double lr = 3e-4;
};

struct StepOutcome {
  double loss = 0.0;  // mean over micro batches
  OptimizerReport report;
  bool skipped = false;     // precision policy found non-finite gradients
  double loss_scale = 1.0;  // what the loss was multiplied by for backward
  Phase phase = Phase::full;
};

class Executor {
 public:
  Executor(Model& model, Optimizer& optimizer, PrecisionPolicy& precision, std::vector<MemoryStrategy*> strategies,
           ExecutorOptions options);

  // Calls every strategy's on_attach once, before the first step, then allocates the model's
  // persistent rows that are still unallocated (Allocation::deferred) where the strategies put them.
  void attach();
  // on_attach only, for `strata plan`: the table shows where rows would live.
  void attach_without_allocating();
  // One optimizer step over these micro batches (their count is train.micro_batches).
  StepOutcome train_step(std::int64_t step, std::span<const MicroBatch> micro_batches);
  // Forward and backward only: gradients of the mean loss, accumulated into the grad rows (which
  // the caller zeroes). Used by train_step and by gradient tests.
  double forward_backward(std::int64_t step, std::span<const MicroBatch> micro_batches, Phase phase);
  // Sum of per-position losses of the first `rows` sequences of a micro batch (forward only).
  double forward_loss_sum(const MicroBatch& batch, int rows);

  Model& model() noexcept { return model_; }

 private:
  friend class ExecutorHookContext;
  enum class Hook { attach, before_forward, after_forward, before_backward, after_backward, before_step, after_step };
  void run_hooks(Hook hook, int layer, bool reverse);
  void ensure_on_device(int layer, TensorGroup group);
  std::vector<ParamSlot> parameter_slots();

  Model& model_;
  Optimizer& optimizer_;
  PrecisionPolicy& precision_;
  std::vector<MemoryStrategy*> strategies_;
  ExecutorOptions options_;
  std::int64_t step_ = 0;
  int micro_batch_ = 0;
  int micro_batches_ = 1;
  Phase phase_ = Phase::full;
};

}  // namespace strata
