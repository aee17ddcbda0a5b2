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

  StateLayout state_layout(std::int64_t count) const noexcept override { return f32_state(2, count); }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] {
      Ops& ops = host_.ops();
      const float grad_scale = config_.begin_step(ops, info, slots, report);
      for (ParamSlot& slot : slots)
        ops.adamw_update(slot.param.f32(), slot.grad.f32(), slot.state[0].f32(), slot.state[1].f32(), slot.param.count,
                         config_.hyper(report, info, slot, grad_scale));
    });
  }

  // The second moment is a running mean of squares: a negative value is corruption, and would be a
  // NaN (its square root) at the first step.
  Status check_state(std::string_view parameter, std::span<const SavedStateBuffer> buffers) const noexcept override {
    return plugins::require_non_negative(parameter, "second moment (state1)", buffers[1].f32());
  }

 private:
  HostServices& host_;
  plugins::AdamWConfig config_;
};

const FactoryDescriptor kFactories[] = {make_factory<Optimizer, AdamW>(
    "adamw", "AdamW with warmup + cosine schedule and global-norm clipping", name_list(plugins::kAdamWKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(adamw, "1.0.0", kFactories)
