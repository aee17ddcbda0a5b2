#pragma once
// The keys of AdamW-style optimizers (betas, eps, weight_decay, grad_clip, schedule, min_lr_ratio),
// read once with their defaults and ranges, and the step's learning rate and global-norm clipping:
// what adamw and adamw8bit share, for any optimizer that takes the same keys (GaLore does).
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/plugin.hpp"
#include "strata/plugin_support/lr_schedule.hpp"

namespace strata::plugin_support {

// A saved buffer that must hold no negative value (a second moment, a block's absmax scale): an
// error naming the first one, for Optimizer::check_state.
inline Status require_non_negative(std::string_view parameter, std::string_view what, std::span<const float> values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0.0f)
      return Status::error("'" + std::string(parameter) + "': " + std::string(what) + " " + std::to_string(values[i]) +
                           " at element " + std::to_string(i) + " is negative");
  return {};
}

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  double grad_clip = 1.0;
  std::string schedule = "cosine";
  double min_lr_ratio = 0.1;

  explicit AdamWConfig(ConfigView& config) {
    const std::vector<double> betas = config.get_double_list("betas", {0.9, 0.95});
    if (betas.size() != 2 || !(betas[0] >= 0 && betas[0] < 1) || !(betas[1] >= 0 && betas[1] < 1))
      config.report_error("betas", "betas must be two numbers in [0, 1), e.g. [0.9, 0.95]");
    else
      beta1 = static_cast<float>(betas[0]), beta2 = static_cast<float>(betas[1]);
    eps = static_cast<float>(config.get_double("eps", 1e-8, 0.0, 1.0));
    weight_decay = static_cast<float>(config.get_double("weight_decay", 0.1, 0.0, 1.0));
    grad_clip = config.get_double("grad_clip", 1.0, 0.0, 1e9);
    schedule = config.get_string("schedule", "cosine", {"cosine", "constant"});
    min_lr_ratio = config.get_double("min_lr_ratio", 0.1, 0.0, 1.0);
  }

  // The step's learning rate and gradient norm (through the backend's reduction), and the factor
  // that clips the gradients to grad_clip: by their own norm, or by `clip_norm` when it is given
  // (Optimizer::begin_step_with_norm).
  float begin_step(Ops& ops, const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report,
                   std::optional<double> clip_norm = std::nullopt) const {
    double sum_of_squares = 0.0;
    for (const ParamSlot& slot : slots) sum_of_squares += ops.sum_of_squares(slot.grad.f32(), slot.grad.count);
    report.grad_norm = std::sqrt(sum_of_squares);
    report.lr = scheduled_lr(info, schedule, min_lr_ratio);
    return clip_factor(grad_clip, clip_norm.value_or(report.grad_norm));
  }

  AdamWHyper hyper(const OptimizerReport& report, const OptimizerStepInfo& info, const ParamSlot& slot,
                   float grad_scale) const {
    return {static_cast<float>(report.lr), beta1, beta2, eps, slot.decay ? weight_decay : 0.0f, info.step, grad_scale};
  }
};

inline constexpr const char* kAdamWKeys[] = {"betas", "eps", "weight_decay", "grad_clip", "schedule", "min_lr_ratio"};

}  // namespace strata::plugin_support
