// AdamW: decoupled weight decay, bias correction, optional global-norm clipping, warmup + cosine.
// The norm and the update are the backend's ops (HostServices::ops()): the tensors live in the
// backend's memory, and the plugin never reads them on the host.
#include "adamw_config.hpp"
#include "strata/plugin.hpp"

namespace {

using namespace strata;

class AdamW final : public Optimizer {
 public:
  AdamW(ConfigView& config, HostServices& host) : host_(host), config_(config) {}

  StateLayout state_layout(const ParamInfo& param) const noexcept override { return f32_state(2, param.count); }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] {
      begin(info, slots, report);
      update(info, slots);
    });
  }

  // In parts (the disk tier): the norm, the lr and the clipping first, then block by block.
  bool steps_in_parts() const noexcept override { return true; }
  Status begin_step(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] { begin(info, slots, report); });
  }
  Status step_part(const OptimizerStepInfo& info, std::span<ParamSlot> slots) override {
    return guarded([&] { update(info, slots); });
  }
  // The fused update's clipping by the previous step's norm.
  bool clips_by_given_norm() const noexcept override { return true; }
  // Its update is ops on the slots alone: the host may run it on offloaded rows (SDK 9.10).
  bool can_update_on_host() const noexcept override { return true; }
  Status begin_step_with_norm(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, double clip_norm,
                              OptimizerReport& report) override {
    return guarded([&] { begin(info, slots, report, clip_norm); });
  }

  // The second moment is a running mean of squares: a negative value is corruption, and would be a
  // NaN (its square root) at the first step.
  Status check_state(std::string_view parameter, std::span<const SavedStateBuffer> buffers) const noexcept override {
    return plugins::require_non_negative(parameter, "second moment (state1)", buffers[1].f32());
  }

 private:
  void begin(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report,
             std::optional<double> clip_norm = std::nullopt) {
    grad_scale_ = config_.begin_step(host_.ops(), info, slots, report, clip_norm);
    report_ = report;
  }
  void update(const OptimizerStepInfo& info, std::span<ParamSlot> slots) {
    Ops& ops = host_.ops();
    for (ParamSlot& slot : slots)
      ops.adamw_update(slot.param.f32(), slot.grad.f32(), slot.state[0].f32(), slot.state[1].f32(), slot.param.count,
                       config_.hyper(report_, info, slot, grad_scale_));
  }

  HostServices& host_;
  plugins::AdamWConfig config_;
  OptimizerReport report_;  // this step's lr and norm, settled before its first part
  float grad_scale_ = 1.0f;
};

const FactoryDescriptor kFactories[] = {make_factory<Optimizer, AdamW>(
    "adamw", "AdamW with warmup + cosine schedule and global-norm clipping", name_list(plugins::kAdamWKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(adamw, "1.0.0", kFactories)
