#pragma once
// Dynamic loss scaling (Micikevicius et al. 2018): the loss is multiplied by a scale before
// backward, so that small gradients stay above f16's smallest values while they pass through f16
// operands; the gradients are divided by it before the update. A step whose gradients overflowed
// (inf or NaN) is skipped and the scale backs off; after growth_interval finite steps in a row it
// grows again, so the scale tracks the largest one that does not overflow.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "strata/status.hpp"

namespace strata::plugins {

struct LossScalerConfig {
  double initial_scale = 65536.0;  // 2^16
  std::int64_t growth_interval = 2000;
  double growth_factor = 2.0;
  double backoff = 0.5;
};

class LossScaler {
 public:
  // Below this a scale would flush every gradient smaller than 1 to zero in f16 (2^-24 is f16's
  // smallest subnormal): gradients that overflow at such a scale are non-finite at any scale.
  static constexpr double kMinScale = 0x1p-24;

  explicit LossScaler(const LossScalerConfig& config) : config_(config), scale_(config.initial_scale) {}

  double scale() const noexcept { return scale_; }
  std::int64_t finite_in_a_row() const noexcept { return finite_in_a_row_; }

  // A step whose scaled gradients were all finite: after growth_interval of them in a row, grow.
  void on_finite_step() noexcept {
    if (++finite_in_a_row_ < config_.growth_interval) return;
    scale_ *= config_.growth_factor;
    finite_in_a_row_ = 0;
  }

  // A step whose scaled gradients overflowed: back off (the step is skipped by the caller).
  Status on_overflow() {
    finite_in_a_row_ = 0;
    const double next = scale_ * config_.backoff;
    if (next < kMinScale)
      return Status::error("gradients are non-finite even at loss scale " + text(scale_) +
                           ": the run diverged (a scale below 2^-24 would flush every gradient to zero)");
    scale_ = next;
    return {};
  }

  // "scale=0x1p+16 finite_in_a_row=12": hexadecimal floating point, so a resume is bitwise.
  std::string state() const {
    char buffer[96];
    std::snprintf(buffer, sizeof buffer, "scale=%a finite_in_a_row=%lld", scale_,
                  static_cast<long long>(finite_in_a_row_));
    return buffer;
  }

  Status restore(std::string_view state) {
    const std::string text_state(state);
    double scale = 0.0;
    long long finite = 0;
    int consumed = 0;
    if (std::sscanf(text_state.c_str(), "scale=%la finite_in_a_row=%lld%n", &scale, &finite, &consumed) != 2 ||
        static_cast<std::size_t>(consumed) != text_state.size() || !std::isfinite(scale) || scale < kMinScale ||
        finite < 0)
      return Status::error("the checkpoint's loss-scaler state '" + text_state +
                           "' is not 'scale=<hex float> finite_in_a_row=<count>'");
    scale_ = scale;
    finite_in_a_row_ = finite;
    return {};
  }

 private:
  static std::string text(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", value);
    return buffer;
  }

  LossScalerConfig config_;
  double scale_;
  std::int64_t finite_in_a_row_ = 0;
};

}  // namespace strata::plugins
