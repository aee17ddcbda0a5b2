#include "lr_schedule.hpp"

#include <cmath>
#include <numbers>
#include <string_view>

namespace strata::plugins {

double scheduled_lr(const OptimizerStepInfo& info, const char* schedule, double min_lr_ratio) {
  const double base = info.base_lr;
  if (info.warmup_steps > 0 && info.step <= info.warmup_steps)
    return base * static_cast<double>(info.step) / static_cast<double>(info.warmup_steps);
  if (std::string_view(schedule) == "constant") return base;
  const double decay_steps = static_cast<double>(std::max<std::int64_t>(1, info.total_steps - info.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(info.step - info.warmup_steps) / decay_steps);
  const double min_lr = base * min_lr_ratio;
  return min_lr + 0.5 * (base - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace strata::plugins
