#pragma once
// Decides when a run has diverged, from its training loss step by step. Two signs:
//   - the loss is non-finite for `nonfinite_steps` steps in a row (skip_nonfinite skipped each of
//     them, so the weights themselves are no longer finite);
//   - the loss stays above `factor` times the best loss seen so far for `steps` finite steps in a
//     row (non-finite steps between them neither count nor break the run of them): a finite
//     blow-up that would otherwise burn hours of compute on a lost run.
// One bad step is noise; several in a row are a trend.
#include <cstdint>
#include <optional>
#include <string>

namespace strata {

struct DivergenceLimits {
  double factor = 100.0;  // 0: never stop on a finite blow-up
  std::int64_t steps = 8;
  std::int64_t nonfinite_steps = 8;  // each a step skip_nonfinite skipped
};

class DivergenceGuard {
 public:
  explicit DivergenceGuard(DivergenceLimits limits) : limits_(limits) {}

  // Records one step's loss; returns why the run has diverged, or nothing.
  std::optional<std::string> observe(std::int64_t step, double loss);

 private:
  DivergenceLimits limits_;
  std::optional<double> best_;
  std::int64_t nonfinite_in_a_row_ = 0;
  std::int64_t above_in_a_row_ = 0;
};

}  // namespace strata
