// A third-party optimizer: Lion (Chen et al. 2023, "Symbolic Discovery of Optimization
// Algorithms"). One state buffer per parameter, the momentum m, where AdamW keeps two:
//
//   c     = beta1 m + (1 - beta1) g           the update direction, before its sign
//   param = param (1 - lr wd) - lr sign(c)
//   m     = beta2 m + (1 - beta2) g
//
// Every update has the same magnitude per element, so Lion wants a learning rate well below
// AdamW's: lr = lr_scale * train.lr, with warmup and cosine decay to 10%. The default, 0.05, was
// the best of 0.02, 0.05, 0.15 and 0.3 on the quickstart's 1000 steps (docs/benchmarks.md).
//
// c is scratch, not state: the update is elementwise, so it runs in chunks of at most 256 Ki
// elements through one buffer the plugin asks the host for once (HostServices::memory): 1 MiB for
// the whole model, accounted under the plugin's name, never saved in checkpoints. Everything runs through the op table
// (copy, scale, add_scaled and the elementwise sign), so it runs unchanged on any backend that has
// them; it includes only SDK headers.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class Lion final : public Optimizer {
 public:
  Lion(ConfigView& config, HostServices& host) : host_(host) {
    const std::vector<double> betas = config.get_double_list("betas", {0.9, 0.99});
    if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1) || !(betas[1] >= 0 && betas[1] < 1))
      config.report_error("betas", "betas must be two numbers in [0, 1), e.g. [0.9, 0.99]");
    else
      beta1_ = static_cast<float>(betas[0]), beta2_ = static_cast<float>(betas[1]);
    weight_decay_ = static_cast<float>(config.get_double("weight_decay", 0.1, 0.0, 10.0));
    lr_scale_ = config.get_double("lr_scale", 0.05, 1e-4, 10.0);
  }

  StateLayout state_layout(const ParamInfo& param) const noexcept override {
    return f32_state(1, param.count);  // the momentum
  }

  Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) override {
    Ops& ops = host_.ops();
    if (!ops.supports(Op::sign))
      return Status::error("the backend '" + std::string(ops.backend()) + "' has no elementwise sign op");
    if (direction_.empty()) {
      std::int64_t largest = 0;
      for (const ParamSlot& slot : slots) largest = std::max(largest, slot.param.count);
      direction_ = host_.memory().device_floats("lion.direction", static_cast<std::uint64_t>(std::min(largest, kChunk)),
                                                MemoryCategory::optimizer);
    }
    double sum_of_squares = 0.0;
    for (const ParamSlot& slot : slots) sum_of_squares += ops.sum_of_squares(slot.grad.f32(), slot.grad.count);
    report.grad_norm = std::sqrt(sum_of_squares);  // reported; sign() makes Lion's step clip-free
    report.lr = lr_scale_ * scheduled_lr(info);
    const auto lr = static_cast<float>(report.lr);
    float* c = direction_.f32();
    for (ParamSlot& slot : slots) {
      for (std::int64_t first = 0; first < slot.param.count; first += kChunk) {
        const std::int64_t n = std::min(kChunk, slot.param.count - first);
        float* param = slot.param.f32() + first;
        const float* grad = slot.grad.f32() + first;
        float* m = slot.state[0].f32() + first;
        ops.copy(c, m, static_cast<std::uint64_t>(n) * sizeof(float));
        ops.scale(c, beta1_, n);
        ops.add_scaled(c, 1.0f - beta1_, grad, n);
        ops.sign(c, c, n);
        if (slot.decay && weight_decay_ > 0.0f) ops.scale(param, 1.0f - lr * weight_decay_, n);
        ops.add_scaled(param, -lr, c, n);
        ops.scale(m, beta2_, n);
        ops.add_scaled(m, 1.0f - beta2_, grad, n);
      }
    }
    return {};
  }

 private:
  // Linear warmup, then cosine decay to 10% of the base rate at the last step.
  static double scheduled_lr(const OptimizerStepInfo& info) {
    if (info.warmup_steps > 0 && info.step <= info.warmup_steps)
      return info.base_lr * static_cast<double>(info.step) / static_cast<double>(info.warmup_steps);
    const double span = static_cast<double>(std::max<std::int64_t>(1, info.total_steps - info.warmup_steps));
    const double progress = std::min(1.0, static_cast<double>(info.step - info.warmup_steps) / span);
    return info.base_lr * (0.1 + 0.45 * (1.0 + std::cos(std::numbers::pi * progress)));
  }

  static constexpr std::int64_t kChunk = 256 * 1024;

  HostServices& host_;
  float beta1_ = 0.9f;
  float beta2_ = 0.99f;
  float weight_decay_ = 0.1f;
  double lr_scale_ = 0.05;
  TensorView direction_;  // scratch for c, one chunk
};

constexpr const char* kKeys[] = {"betas", "weight_decay", "lr_scale"};
const FactoryDescriptor kFactories[] = {make_factory<Optimizer, Lion>(
    "lion", "Lion: sign of interpolated momentum, one state buffer per parameter", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(lion, "1.0.0", kFactories)
