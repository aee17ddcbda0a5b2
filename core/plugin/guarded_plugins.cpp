#include "core/plugin/guarded_plugins.hpp"

#include "strata/plugin_guard.hpp"

#include <exception>
#include <string_view>
#include <utility>

namespace strata {

namespace {

// Runs one plugin call; `where_of()` says when it happened (" (layer 3, step 5)"), worded only
// when the call failed.
template <typename Where, typename Body>
Status guarded_call(const std::string& label, std::string_view hook, Where&& where_of, Body&& body) noexcept {
  try {
    Status status = body();
    if (status) return status;
    // The SDK's adapter in the plugin caught an exception (plugin_guard.hpp).
    if (status.message().starts_with(plugin_guard::kThrew))
      return Status::error(label + " threw in " + std::string(hook) + where_of() + ": " +
                           status.message().substr(plugin_guard::kThrew.size()));
    return Status::error(label + " failed in " + std::string(hook) + where_of() + ": " + status.message());
  } catch (const std::exception& e) {  // an object not made by make_factory
    return Status::error(label + " threw in " + std::string(hook) + where_of() + ": " + e.what());
  } catch (...) {
    return Status::error(label + " threw in " + std::string(hook) + where_of() +
                         ": an exception that is not a std::exception (no message)");
  }
}

std::string step_text(std::int64_t step) {
  return " (step " + std::to_string(step) + ")";
}

class GuardedStrategy final : public MemoryStrategy {
 public:
  GuardedStrategy(std::shared_ptr<MemoryStrategy> plugin, std::string label)
      : plugin_(std::move(plugin)), label_(std::move(label)) {}

  Status on_attach(HookContext& context) noexcept override {
    return guarded_call(
        label_, "on_attach", [] { return std::string(" (before the first step)"); },
        [&] { return plugin_->on_attach(context); });
  }
  Status before_forward(HookContext& context) noexcept override {
    return guarded_call(
        label_, "before_forward", [&] { return where(context); }, [&] { return plugin_->before_forward(context); });
  }
  Status after_forward(HookContext& context) noexcept override {
    return guarded_call(
        label_, "after_forward", [&] { return where(context); }, [&] { return plugin_->after_forward(context); });
  }
  Status before_backward(HookContext& context) noexcept override {
    return guarded_call(
        label_, "before_backward", [&] { return where(context); }, [&] { return plugin_->before_backward(context); });
  }
  Status after_backward(HookContext& context) noexcept override {
    return guarded_call(
        label_, "after_backward", [&] { return where(context); }, [&] { return plugin_->after_backward(context); });
  }
  Status before_step(HookContext& context) noexcept override {
    return guarded_call(
        label_, "before_step", [&] { return where(context); }, [&] { return plugin_->before_step(context); });
  }
  Status after_step(HookContext& context) noexcept override {
    return guarded_call(
        label_, "after_step", [&] { return where(context); }, [&] { return plugin_->after_step(context); });
  }
  Status plan_parameters(ParameterPlan& plan) noexcept override {
    return guarded_call(
        label_, "plan_parameters", [] { return std::string(" (before the model is built)"); },
        [&] { return plugin_->plan_parameters(plan); });
  }

 private:
  static std::string where(const HookContext& context) {
    if (context.layer() < 0) return step_text(context.step());
    return " (layer " + std::to_string(context.layer()) + ", step " + std::to_string(context.step()) + ")";
  }
  std::shared_ptr<MemoryStrategy> plugin_;
  std::string label_;
};

class GuardedOptimizer final : public Optimizer {
 public:
  GuardedOptimizer(std::shared_ptr<Optimizer> plugin, std::string label)
      : plugin_(std::move(plugin)), label_(std::move(label)) {}
  StateLayout state_layout(std::int64_t count) const noexcept override { return plugin_->state_layout(count); }
  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) noexcept override {
    return guarded_call(
        label_, "step", [&] { return step_text(info.step); }, [&] { return plugin_->step(info, slots, report); });
  }

 private:
  std::shared_ptr<Optimizer> plugin_;
  std::string label_;
};

class GuardedPrecision final : public PrecisionPolicy {
 public:
  GuardedPrecision(std::shared_ptr<PrecisionPolicy> plugin, std::string label)
      : plugin_(std::move(plugin)), label_(std::move(label)) {}
  DType weight_storage() const noexcept override { return plugin_->weight_storage(); }
  DType embedding_storage() const noexcept override { return plugin_->embedding_storage(); }
  WeightQuantizer* weight_quantizer() noexcept override { return plugin_->weight_quantizer(); }
  DType activation_storage() const noexcept override { return plugin_->activation_storage(); }
  void begin_step(Phase phase) noexcept override { plugin_->begin_step(phase); }
  double loss_scale() const noexcept override { return plugin_->loss_scale(); }
  Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) noexcept override {
    return guarded_call(
        label_, "unscale_and_check", [] { return std::string(); },
        [&] { return plugin_->unscale_and_check(ops, grads, decision); });
  }
  Status state(std::string& out) const noexcept override {
    return guarded_call(
        label_, "state", [] { return std::string(" (saving a checkpoint)"); }, [&] { return plugin_->state(out); });
  }
  Status restore_state(std::string_view state) noexcept override {
    return guarded_call(
        label_, "restore_state", [] { return std::string(" (resuming from a checkpoint)"); },
        [&] { return plugin_->restore_state(state); });
  }

 private:
  std::shared_ptr<PrecisionPolicy> plugin_;
  std::string label_;
};

class GuardedSink final : public TelemetrySink {
 public:
  GuardedSink(std::shared_ptr<TelemetrySink> plugin, std::string label)
      : plugin_(std::move(plugin)), label_(std::move(label)) {}
  Status on_run_start(const RunInfo& info) noexcept override {
    return guarded_call(
        label_, "on_run_start", [] { return std::string(); }, [&] { return plugin_->on_run_start(info); });
  }
  Status on_step(const StepMetrics& metrics) noexcept override {
    return guarded_call(
        label_, "on_step", [&] { return step_text(metrics.step); }, [&] { return plugin_->on_step(metrics); });
  }
  Status on_run_end(const RunSummary& summary) noexcept override {
    return guarded_call(
        label_, "on_run_end", [] { return std::string(); }, [&] { return plugin_->on_run_end(summary); });
  }

 private:
  std::shared_ptr<TelemetrySink> plugin_;
  std::string label_;
};

// The model names the layer when it reports a kernel's failure; the kernel never sees it.
class GuardedKernel final : public Kernel {
 public:
  GuardedKernel(std::shared_ptr<Kernel> plugin, std::string label)
      : plugin_(std::move(plugin)), label_(std::move(label)) {}
  std::string_view op() const noexcept override { return plugin_->op(); }
  // A refusal is the plugin's own sentence (the host names the manifest key around it); only an
  // exception is worded as a failure of the plugin.
  Status check(const AttentionShape& shape, const KernelTarget& target) const noexcept override {
    Status refusal;
    const Status failure = guarded_call(
        label_, "check", [] { return std::string(); },
        [&] {
          refusal = plugin_->check(shape, target);
          return refusal.message().starts_with(plugin_guard::kThrew) ? refusal : Status{};
        });
    return failure ? refusal : failure;
  }
  Status bind(const KernelTarget& target) noexcept override {
    return guarded_call(
        label_, "bind", [] { return std::string(); }, [&] { return plugin_->bind(target); });
  }
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override {
    return plugin_->saved_floats(shape);
  }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return plugin_->backward_scratch_floats(shape);
  }
  Status attention_forward(const AttentionShape& shape, float* out, float* saved,
                           const AttentionInputs& in) noexcept override {
    return guarded_call(
        label_, "attention_forward", [] { return std::string(); },
        [&] { return plugin_->attention_forward(shape, out, saved, in); });
  }
  Status attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                            const float* out, const AttentionInputs& in, const float* saved,
                            float* scratch) noexcept override {
    return guarded_call(
        label_, "attention_backward", [] { return std::string(); },
        [&] { return plugin_->attention_backward(shape, grads, dout, out, in, saved, scratch); });
  }

 private:
  std::shared_ptr<Kernel> plugin_;
  std::string label_;
};

class GuardedPhaseController final : public PhaseController {
 public:
  GuardedPhaseController(std::shared_ptr<PhaseController> plugin, std::string label)
      : plugin_(std::move(plugin)), label_(std::move(label)) {}
  Status attach(std::span<const ControlledParameter> parameters, PhaseControllerMemory& memory) noexcept override {
    return guarded_call(
        label_, "attach", [] { return std::string(" (before the first step)"); },
        [&] { return plugin_->attach(parameters, memory); });
  }
  Status choose_phase(std::int64_t step, Phase& phase) noexcept override {
    return guarded_call(
        label_, "choose_phase", [&] { return step_text(step); }, [&] { return plugin_->choose_phase(step, phase); });
  }
  Status predict(const StepObservation& observed, std::span<const ControlledParameter> parameters,
                 PredictOutcome& outcome) noexcept override {
    return guarded_call(
        label_, "predict", [&] { return step_text(observed.step); },
        [&] { return plugin_->predict(observed, parameters, outcome); });
  }
  Status observe(const StepObservation& observed, std::span<const ControlledParameter> parameters) noexcept override {
    return guarded_call(
        label_, "observe", [&] { return step_text(observed.step); },
        [&] { return plugin_->observe(observed, parameters); });
  }
  Status state(std::string& out) noexcept override {
    return guarded_call(
        label_, "state", [] { return std::string(" (saving a checkpoint)"); }, [&] { return plugin_->state(out); });
  }
  Status restore_state(std::string_view saved) noexcept override {
    return guarded_call(
        label_, "restore_state", [] { return std::string(" (resuming from a checkpoint)"); },
        [&] { return plugin_->restore_state(saved); });
  }

 private:
  std::shared_ptr<PhaseController> plugin_;
  std::string label_;
};

}  // namespace

std::shared_ptr<PhaseController> guard_plugin(std::shared_ptr<PhaseController> plugin, std::string label) {
  return std::make_shared<GuardedPhaseController>(std::move(plugin), std::move(label));
}
std::shared_ptr<MemoryStrategy> guard_plugin(std::shared_ptr<MemoryStrategy> plugin, std::string label) {
  return std::make_shared<GuardedStrategy>(std::move(plugin), std::move(label));
}
std::shared_ptr<Optimizer> guard_plugin(std::shared_ptr<Optimizer> plugin, std::string label) {
  return std::make_shared<GuardedOptimizer>(std::move(plugin), std::move(label));
}
std::shared_ptr<PrecisionPolicy> guard_plugin(std::shared_ptr<PrecisionPolicy> plugin, std::string label) {
  return std::make_shared<GuardedPrecision>(std::move(plugin), std::move(label));
}
std::shared_ptr<TelemetrySink> guard_plugin(std::shared_ptr<TelemetrySink> plugin, std::string label) {
  return std::make_shared<GuardedSink>(std::move(plugin), std::move(label));
}
std::shared_ptr<Kernel> guard_plugin(std::shared_ptr<Kernel> plugin, std::string label) {
  return std::make_shared<GuardedKernel>(std::move(plugin), std::move(label));
}

}  // namespace strata
