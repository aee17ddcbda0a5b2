#pragma once
// Linear warmup to the base rate, then cosine decay to min_lr_ratio * base over the rest.
#include <cstdint>

#include "strata/optimizer.hpp"

namespace strata::plugins {

double scheduled_lr(const OptimizerStepInfo& info, const char* schedule, double min_lr_ratio);

}  // namespace strata::plugins
