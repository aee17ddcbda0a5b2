#pragma once
// What the built-in optimizers share beside their update: the learning rate schedule (linear warmup
// to the base rate, then cosine decay to min_lr_ratio * base over the rest) and norm clipping.
#include <cstdint>

#include "strata/optimizer.hpp"

namespace strata::plugins {

double scheduled_lr(const OptimizerStepInfo& info, const char* schedule, double min_lr_ratio);

// The factor that brings gradients of norm `norm` down to `grad_clip` (0: no clipping).
inline float clip_factor(double grad_clip, double norm) {
  return grad_clip > 0.0 && norm > grad_clip ? static_cast<float>(grad_clip / norm) : 1.0f;
}

}  // namespace strata::plugins
