#pragma once
// Exceptions never cross the library boundary: make_factory wraps every object a plugin creates
// in one of these adapters, compiled into the plugin itself (they are header-only). Each forwards
// the hooks to the plugin's object and turns any exception it throws, std::exception or not, into
// an error Status ("threw: <what>"), caught by the plugin's own runtime. The host then names the
// plugin, the hook, the layer and the step. Plugin authors never see these classes.
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "strata/kernel.hpp"
#include "strata/memory_strategy.hpp"
#include "strata/optimizer.hpp"
#include "strata/phase_controller.hpp"
#include "strata/precision_policy.hpp"
#include "strata/telemetry_sink.hpp"

namespace strata::plugin_guard {

// How an adapter's error Status says that the plugin threw; the host words it "threw in <hook>".
inline constexpr std::string_view kThrew = "threw: ";

template <typename Body>
Status catch_all(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return Status::error(std::string(kThrew) + e.what());
  } catch (...) {
    return Status::error(std::string(kThrew) + "an exception that is not a std::exception (no message)");
  }
}

class StrategyGuard final : public MemoryStrategy {
 public:
  explicit StrategyGuard(std::unique_ptr<MemoryStrategy> object) : object_(std::move(object)) {}
  Status on_attach(HookContext& c) noexcept override {
    return catch_all([&] { return object_->on_attach(c); });
  }
  Status before_forward(HookContext& c) noexcept override {
    return catch_all([&] { return object_->before_forward(c); });
  }
  Status after_forward(HookContext& c) noexcept override {
    return catch_all([&] { return object_->after_forward(c); });
  }
  Status before_backward(HookContext& c) noexcept override {
    return catch_all([&] { return object_->before_backward(c); });
  }
  Status after_backward(HookContext& c) noexcept override {
    return catch_all([&] { return object_->after_backward(c); });
  }
  Status before_step(HookContext& c) noexcept override {
    return catch_all([&] { return object_->before_step(c); });
  }
  Status after_step(HookContext& c) noexcept override {
    return catch_all([&] { return object_->after_step(c); });
  }
  Status plan_parameters(ParameterPlan& plan) noexcept override {
    return catch_all([&] { return object_->plan_parameters(plan); });
  }

 private:
  std::unique_ptr<MemoryStrategy> object_;
};

class OptimizerGuard final : public Optimizer {
 public:
  explicit OptimizerGuard(std::unique_ptr<Optimizer> object) : object_(std::move(object)) {}
  StateLayout state_layout(std::int64_t count) const noexcept override { return object_->state_layout(count); }
  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) noexcept override {
    return catch_all([&] { return object_->step(info, slots, report); });
  }

 private:
  std::unique_ptr<Optimizer> object_;
};

class PrecisionGuard final : public PrecisionPolicy {
 public:
  explicit PrecisionGuard(std::unique_ptr<PrecisionPolicy> object) : object_(std::move(object)) {}
  DType weight_storage() const noexcept override { return object_->weight_storage(); }
  DType embedding_storage() const noexcept override { return object_->embedding_storage(); }
  WeightQuantizer* weight_quantizer() noexcept override { return object_->weight_quantizer(); }
  DType activation_storage() const noexcept override { return object_->activation_storage(); }
  void begin_step(Phase phase) noexcept override { object_->begin_step(phase); }
  double loss_scale() const noexcept override { return object_->loss_scale(); }
  Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) noexcept override {
    return catch_all([&] { return object_->unscale_and_check(ops, grads, decision); });
  }
  Status state(std::string& out) const noexcept override {
    return catch_all([&] { return object_->state(out); });
  }
  Status restore_state(std::string_view state) noexcept override {
    return catch_all([&] { return object_->restore_state(state); });
  }

 private:
  std::unique_ptr<PrecisionPolicy> object_;
};

class TelemetryGuard final : public TelemetrySink {
 public:
  explicit TelemetryGuard(std::unique_ptr<TelemetrySink> object) : object_(std::move(object)) {}
  Status on_run_start(const RunInfo& info) noexcept override {
    return catch_all([&] { return object_->on_run_start(info); });
  }
  Status on_step(const StepMetrics& metrics) noexcept override {
    return catch_all([&] { return object_->on_step(metrics); });
  }
  Status on_run_end(const RunSummary& summary) noexcept override {
    return catch_all([&] { return object_->on_run_end(summary); });
  }

 private:
  std::unique_ptr<TelemetrySink> object_;
};

class KernelGuard final : public Kernel {
 public:
  explicit KernelGuard(std::unique_ptr<Kernel> object) : object_(std::move(object)) {}
  std::string_view op() const noexcept override { return object_->op(); }
  Status check(const AttentionShape& shape, const KernelTarget& target) const noexcept override {
    return catch_all([&] { return object_->check(shape, target); });
  }
  Status bind(const KernelTarget& target) noexcept override {
    return catch_all([&] { return object_->bind(target); });
  }
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override {
    return object_->saved_floats(shape);
  }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return object_->backward_scratch_floats(shape);
  }
  Status attention_forward(const AttentionShape& shape, float* out, float* saved,
                           const AttentionInputs& in) noexcept override {
    return catch_all([&] { return object_->attention_forward(shape, out, saved, in); });
  }
  Status attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                            const float* out, const AttentionInputs& in, const float* saved,
                            float* scratch) noexcept override {
    return catch_all([&] { return object_->attention_backward(shape, grads, dout, out, in, saved, scratch); });
  }

 private:
  std::unique_ptr<Kernel> object_;
};

class PhaseControllerGuard final : public PhaseController {
 public:
  explicit PhaseControllerGuard(std::unique_ptr<PhaseController> object) : object_(std::move(object)) {}
  Status attach(std::span<const ControlledParameter> parameters, PhaseControllerMemory& memory) noexcept override {
    return catch_all([&] { return object_->attach(parameters, memory); });
  }
  Status choose_phase(std::int64_t step, Phase& phase) noexcept override {
    return catch_all([&] { return object_->choose_phase(step, phase); });
  }
  Status predict(const StepObservation& observed, std::span<const ControlledParameter> parameters,
                 PredictOutcome& outcome) noexcept override {
    return catch_all([&] { return object_->predict(observed, parameters, outcome); });
  }
  Status observe(const StepObservation& observed, std::span<const ControlledParameter> parameters) noexcept override {
    return catch_all([&] { return object_->observe(observed, parameters); });
  }
  Status state(std::string& out) noexcept override {
    return catch_all([&] { return object_->state(out); });
  }
  Status restore_state(std::string_view saved) noexcept override {
    return catch_all([&] { return object_->restore_state(saved); });
  }

 private:
  std::unique_ptr<PhaseController> object_;
};

inline std::unique_ptr<MemoryStrategy> wrap(std::unique_ptr<MemoryStrategy> object) {
  return std::make_unique<StrategyGuard>(std::move(object));
}
inline std::unique_ptr<Optimizer> wrap(std::unique_ptr<Optimizer> object) {
  return std::make_unique<OptimizerGuard>(std::move(object));
}
inline std::unique_ptr<PrecisionPolicy> wrap(std::unique_ptr<PrecisionPolicy> object) {
  return std::make_unique<PrecisionGuard>(std::move(object));
}
inline std::unique_ptr<TelemetrySink> wrap(std::unique_ptr<TelemetrySink> object) {
  return std::make_unique<TelemetryGuard>(std::move(object));
}
inline std::unique_ptr<Kernel> wrap(std::unique_ptr<Kernel> object) {
  return std::make_unique<KernelGuard>(std::move(object));
}
inline std::unique_ptr<PhaseController> wrap(std::unique_ptr<PhaseController> object) {
  return std::make_unique<PhaseControllerGuard>(std::move(object));
}

}  // namespace strata::plugin_guard
