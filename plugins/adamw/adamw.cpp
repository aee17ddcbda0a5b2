// AdamW: decoupled weight decay, bias correction, optional global-norm clipping, warmup + cosine.
// The norm and the update are the backend's ops (HostServices::ops()): the tensors live in the
// backend's memory, and the plugin never reads them on the host.
#include <cmath>
#include <string>

#include "lr_schedule.hpp"
#include "strata/plugin.hpp"

namespace {

using namespace strata;

class AdamW final : public Optimizer {
 public:
  AdamW(ConfigView& config, HostServices& host) : host_(host) {
    const std::vector<double> betas = config.get_double_list("betas", {0.9, 0.95});
    if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1) || !(betas[1] >= 0 && betas[1] < 1))
      config.report_error("betas", "betas must be two numbers in [0, 1), e.g. [0.9, 0.95]");
    else
      beta1_ = static_cast<float>(betas[0]), beta2_ = static_cast<float>(betas[1]);
    eps_ = static_cast<float>(config.get_double("eps", 1e-8, 0.0, 1.0));
    weight_decay_ = static_cast<float>(config.get_double("weight_decay", 0.1, 0.0, 1.0));
    grad_clip_ = config.get_double("grad_clip", 1.0, 0.0, 1e9);
    schedule_ = config.get_string("schedule", "cosine", {"cosine", "constant"});
    min_lr_ratio_ = config.get_double("min_lr_ratio", 0.1, 0.0, 1.0);
  }

  StateLayout state_layout(std::int64_t count) const noexcept override { return f32_state(2, count); }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    return guarded([&] {
      Ops& ops = host_.ops();
      double sum_of_squares = 0.0;
      for (const ParamSlot& slot : slots) sum_of_squares += ops.sum_of_squares(slot.grad.f32(), slot.grad.count);
      report.grad_norm = std::sqrt(sum_of_squares);
      report.lr = plugins::scheduled_lr(info, schedule_.c_str(), min_lr_ratio_);
      float grad_scale = 1.0f;
      if (grad_clip_ > 0.0 && report.grad_norm > grad_clip_)
        grad_scale = static_cast<float>(grad_clip_ / report.grad_norm);
      for (ParamSlot& slot : slots) {
        AdamWHyper hyper{static_cast<float>(report.lr),     beta1_,    beta2_,    eps_,
                         slot.decay ? weight_decay_ : 0.0f, info.step, grad_scale};
        ops.adamw_update(slot.param.f32(), slot.grad.f32(), slot.state[0].f32(), slot.state[1].f32(), slot.param.count,
                         hyper);
      }
    });
  }

 private:
  HostServices& host_;
  float beta1_ = 0.9f;
  float beta2_ = 0.95f;
  float eps_ = 1e-8f;
  float weight_decay_ = 0.1f;
  double grad_clip_ = 1.0;
  std::string schedule_;
  double min_lr_ratio_ = 0.1;
};

constexpr const char* kKeys[] = {"betas", "eps", "weight_decay", "grad_clip", "schedule", "min_lr_ratio"};
const FactoryDescriptor kFactories[] = {make_factory<Optimizer, AdamW>(
    "adamw", "AdamW with warmup + cosine schedule and global-norm clipping", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(adamw, "1.0.0", kFactories)
