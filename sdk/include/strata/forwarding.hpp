#pragma once
// One forwarder per interface a plugin implements: each entry point is listed here once, and two
// policies use the list. The SDK's adapter (strata/plugin_guard.hpp), compiled into the plugin,
// catches the plugin's exceptions; the host's adapter names the plugin, the hook and the step, and
// skips an entry point newer than the plugin's SDK minor (strata/abi.hpp, the version rule).
//
// A Policy has:
//   bool has(std::uint32_t since_minor) const noexcept;   // does the object have this entry point?
//   Status call(std::string_view hook, const CallSite& site, Body body) const noexcept;
//   Status answer(std::string_view hook, Body body) const noexcept;  // an error is a reply, not a failure
//
// An entry point added in minor N forwards as `policy_.has(N) ? <call> : <its default>` (every entry
// point of 10.0 is in every 10.x plugin, so none is gated yet).
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>

#include "strata/kernel.hpp"
#include "strata/memory_strategy.hpp"
#include "strata/optimizer.hpp"
#include "strata/phase_controller.hpp"
#include "strata/precision_policy.hpp"
#include "strata/telemetry_sink.hpp"

namespace strata::forwarding {

// Where a call happened, for the host's wording of a failure: a hook's layer and step, a step
// number, or a moment ("saving a checkpoint").
struct CallSite {
  const HookContext* context = nullptr;
  std::int64_t step = 0;
  std::string_view moment;
  int layer = -1;  // a kernel's call: its block (with `step`)
};

inline CallSite at(const HookContext& context) noexcept {
  return {&context, 0, {}};
}
inline CallSite at_step(std::int64_t step) noexcept {
  return {nullptr, step, {}};
}
inline CallSite at_moment(std::string_view moment) noexcept {
  return {nullptr, 0, moment};
}
inline CallSite at_kernel(const KernelCall& call) noexcept {
  return {nullptr, call.step, {}, call.layer};
}

// Forwarder<Interface, Policy> implements Interface by forwarding each entry point to an object of
// it through the policy; one specialisation per interface below.
template <typename Interface, typename Policy>
class Forwarder;

template <typename Policy>
class Forwarder<MemoryStrategy, Policy> final : public MemoryStrategy {
 public:
  Forwarder(std::shared_ptr<MemoryStrategy> object, Policy policy)
      : object_(std::move(object)), policy_(std::move(policy)) {}
  Status on_attach(HookContext& c) noexcept override {
    return policy_.call("on_attach", at_moment("before the first step"), [&] { return object_->on_attach(c); });
  }
  Status before_forward(HookContext& c) noexcept override {
    return policy_.call("before_forward", at(c), [&] { return object_->before_forward(c); });
  }
  Status after_forward(HookContext& c) noexcept override {
    return policy_.call("after_forward", at(c), [&] { return object_->after_forward(c); });
  }
  Status before_backward(HookContext& c) noexcept override {
    return policy_.call("before_backward", at(c), [&] { return object_->before_backward(c); });
  }
  Status after_backward(HookContext& c) noexcept override {
    return policy_.call("after_backward", at(c), [&] { return object_->after_backward(c); });
  }
  Status before_step(HookContext& c) noexcept override {
    return policy_.call("before_step", at(c), [&] { return object_->before_step(c); });
  }
  Status after_step(HookContext& c) noexcept override {
    return policy_.call("after_step", at(c), [&] { return object_->after_step(c); });
  }
  Status plan_parameters(ParameterPlan& plan) noexcept override {
    return policy_.call("plan_parameters", at_moment("before the model is built"),
                        [&] { return object_->plan_parameters(plan); });
  }
  Status state(std::string& out) noexcept override {
    return policy_.call("state", at_moment("saving a checkpoint"), [&] { return object_->state(out); });
  }
  Status restore_state(std::string_view saved) noexcept override {
    return policy_.call("restore_state", at_moment("resuming from a checkpoint"),
                        [&] { return object_->restore_state(saved); });
  }
  ActivationCodec* activation_codec() noexcept override { return object_->activation_codec(); }

 private:
  std::shared_ptr<MemoryStrategy> object_;
  Policy policy_;
};

template <typename Policy>
class Forwarder<Optimizer, Policy> final : public Optimizer {
 public:
  Forwarder(std::shared_ptr<Optimizer> object, Policy policy)
      : object_(std::move(object)), policy_(std::move(policy)) {}
  StateLayout state_layout(const ParamInfo& param) const noexcept override { return object_->state_layout(param); }
  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) noexcept override {
    return policy_.call("step", at_step(info.step), [&] { return object_->step(info, slots, report); });
  }
  Status check_state(std::string_view parameter, std::span<const SavedStateBuffer> buffers) const noexcept override {
    return policy_.answer("check_state", [&] { return object_->check_state(parameter, buffers); });
  }
  bool steps_in_parts() const noexcept override { return object_->steps_in_parts(); }
  Status begin_step(const OptimizerStepInfo& info, std::span<const ParamSlot> slots,
                    OptimizerReport& report) noexcept override {
    return policy_.call("begin_step", at_step(info.step), [&] { return object_->begin_step(info, slots, report); });
  }
  Status step_part(const OptimizerStepInfo& info, std::span<ParamSlot> slots) noexcept override {
    return policy_.call("step_part", at_step(info.step), [&] { return object_->step_part(info, slots); });
  }
  bool clips_by_given_norm() const noexcept override { return object_->clips_by_given_norm(); }
  bool can_update_on_host() const noexcept override { return object_->can_update_on_host(); }
  Status begin_step_with_norm(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, double clip_norm,
                              OptimizerReport& report) noexcept override {
    return policy_.call("begin_step_with_norm", at_step(info.step),
                        [&] { return object_->begin_step_with_norm(info, slots, clip_norm, report); });
  }

 private:
  std::shared_ptr<Optimizer> object_;
  Policy policy_;
};

template <typename Policy>
class Forwarder<PrecisionPolicy, Policy> final : public PrecisionPolicy {
 public:
  Forwarder(std::shared_ptr<PrecisionPolicy> object, Policy policy)
      : object_(std::move(object)), policy_(std::move(policy)) {}
  DType weight_storage() const noexcept override { return object_->weight_storage(); }
  DType embedding_storage() const noexcept override { return object_->embedding_storage(); }
  WeightQuantizer* weight_quantizer() noexcept override { return object_->weight_quantizer(); }
  Bf16Rounding* bf16_rounding() noexcept override { return object_->bf16_rounding(); }
  DType activation_storage() const noexcept override { return object_->activation_storage(); }
  void begin_step(Phase phase) noexcept override { object_->begin_step(phase); }
  double loss_scale() const noexcept override { return object_->loss_scale(); }
  Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) noexcept override {
    return policy_.call("unscale_and_check", {}, [&] { return object_->unscale_and_check(ops, grads, decision); });
  }
  Status state(std::string& out) const noexcept override {
    return policy_.call("state", at_moment("saving a checkpoint"), [&] { return object_->state(out); });
  }
  Status restore_state(std::string_view state) noexcept override {
    return policy_.call("restore_state", at_moment("resuming from a checkpoint"),
                        [&] { return object_->restore_state(state); });
  }

 private:
  std::shared_ptr<PrecisionPolicy> object_;
  Policy policy_;
};

template <typename Policy>
class Forwarder<TelemetrySink, Policy> final : public TelemetrySink {
 public:
  Forwarder(std::shared_ptr<TelemetrySink> object, Policy policy)
      : object_(std::move(object)), policy_(std::move(policy)) {}
  Status on_run_start(const RunInfo& info) noexcept override {
    return policy_.call("on_run_start", {}, [&] { return object_->on_run_start(info); });
  }
  Status on_step(const StepMetrics& metrics) noexcept override {
    return policy_.call("on_step", at_step(metrics.step), [&] { return object_->on_step(metrics); });
  }
  Status on_run_end(const RunSummary& summary) noexcept override {
    return policy_.call("on_run_end", {}, [&] { return object_->on_run_end(summary); });
  }
  Status on_step_disk(const DiskStepMetrics& metrics) noexcept override {
    return policy_.call("on_step_disk", at_step(metrics.step), [&] { return object_->on_step_disk(metrics); });
  }
  Status on_step_rank(const RankStepMetrics& metrics) noexcept override {
    return policy_.call("on_step_rank", at_step(metrics.step), [&] { return object_->on_step_rank(metrics); });
  }

 private:
  std::shared_ptr<TelemetrySink> object_;
  Policy policy_;
};

template <typename Policy>
class Forwarder<Kernel, Policy> final : public Kernel {
 public:
  Forwarder(std::shared_ptr<Kernel> object, Policy policy) : object_(std::move(object)), policy_(std::move(policy)) {}
  std::string_view op() const noexcept override { return object_->op(); }
  // A refusal is the plugin's own sentence, which the host words around the manifest key.
  Status check(const AttentionShape& shape, const KernelTarget& target) const noexcept override {
    return policy_.answer("check", [&] { return object_->check(shape, target); });
  }
  Status bind(const KernelTarget& target) noexcept override {
    return policy_.call("bind", {}, [&] { return object_->bind(target); });
  }
  std::int64_t saved_floats(const AttentionShape& shape) const noexcept override {
    return object_->saved_floats(shape);
  }
  std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept override {
    return object_->backward_scratch_floats(shape);
  }
  Status attention_forward(const KernelCall& call, const AttentionShape& shape, float* out, float* saved,
                           const AttentionInputs& in) noexcept override {
    return policy_.call("attention_forward", at_kernel(call),
                        [&] { return object_->attention_forward(call, shape, out, saved, in); });
  }
  Status attention_backward(const KernelCall& call, const AttentionShape& shape, const AttentionGrads& grads,
                            const float* dout, const float* out, const AttentionInputs& in, const float* saved,
                            float* scratch) noexcept override {
    return policy_.call("attention_backward", at_kernel(call),
                        [&] { return object_->attention_backward(call, shape, grads, dout, out, in, saved, scratch); });
  }

 private:
  std::shared_ptr<Kernel> object_;
  Policy policy_;
};

template <typename Policy>
class Forwarder<PhaseController, Policy> final : public PhaseController {
 public:
  Forwarder(std::shared_ptr<PhaseController> object, Policy policy)
      : object_(std::move(object)), policy_(std::move(policy)) {}
  Status attach(std::span<const ControlledParameter> parameters, PhaseControllerMemory& memory) noexcept override {
    return policy_.call("attach", at_moment("before the first step"),
                        [&] { return object_->attach(parameters, memory); });
  }
  Status choose_phase(std::int64_t step, Phase& phase) noexcept override {
    return policy_.call("choose_phase", at_step(step), [&] { return object_->choose_phase(step, phase); });
  }
  Status predict(const StepObservation& observed, std::span<const ControlledParameter> parameters,
                 PredictOutcome& outcome) noexcept override {
    return policy_.call("predict", at_step(observed.step),
                        [&] { return object_->predict(observed, parameters, outcome); });
  }
  Status observe(const StepObservation& observed, std::span<const ControlledParameter> parameters) noexcept override {
    return policy_.call("observe", at_step(observed.step), [&] { return object_->observe(observed, parameters); });
  }
  Status state(std::string& out) noexcept override {
    return policy_.call("state", at_moment("saving a checkpoint"), [&] { return object_->state(out); });
  }
  Status restore_state(std::string_view saved) noexcept override {
    return policy_.call("restore_state", at_moment("resuming from a checkpoint"),
                        [&] { return object_->restore_state(saved); });
  }

 private:
  std::shared_ptr<PhaseController> object_;
  Policy policy_;
};

// The forwarder of an interface, for a policy; it shares ownership of the object it forwards to.
template <typename Interface, typename Policy>
std::unique_ptr<Interface> wrap(std::shared_ptr<Interface> object, Policy policy) {
  return std::make_unique<Forwarder<Interface, Policy>>(std::move(object), std::move(policy));
}

}  // namespace strata::forwarding
