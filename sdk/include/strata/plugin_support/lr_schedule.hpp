#pragma once
// The learning-rate schedule the shipped optimizers use (linear warmup to the base rate, then cosine
// decay to min_lr_ratio x base over the rest, or constant), and gradient-norm clipping.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

#include "strata/optimizer.hpp"

namespace strata::plugin_support {

// `schedule`: "cosine" or "constant".
inline double scheduled_lr(const OptimizerStepInfo& info, std::string_view schedule, double min_lr_ratio) {
  const double base = info.base_lr;
  if (info.warmup_steps > 0 && info.step <= info.warmup_steps)
    return base * static_cast<double>(info.step) / static_cast<double>(info.warmup_steps);
  if (schedule == "constant") return base;
  const double decay_steps = static_cast<double>(std::max<std::int64_t>(1, info.total_steps - info.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(info.step - info.warmup_steps) / decay_steps);
  const double min_lr = base * min_lr_ratio;
  return min_lr + 0.5 * (base - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

// The factor that brings gradients of norm `norm` down to `grad_clip` (0: no clipping).
inline float clip_factor(double grad_clip, double norm) {
  return grad_clip > 0.0 && norm > grad_clip ? static_cast<float>(grad_clip / norm) : 1.0f;
}

}  // namespace strata::plugin_support
