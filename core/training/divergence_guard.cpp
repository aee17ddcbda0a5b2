#include "core/training/divergence_guard.hpp"

#include <cmath>
#include <sstream>

namespace strata {

std::optional<std::string> DivergenceGuard::observe(std::int64_t step, double loss) {
  if (!std::isfinite(loss)) {
    // A non-finite loss neither improves the best nor ends a finite blow-up's run of steps, so a
    // run alternating NaN and huge losses still stops.
    if (++nonfinite_in_a_row_ < limits_.nonfinite_steps) return std::nullopt;
    std::ostringstream text;
    text << "training diverged: the loss is " << loss << " at step " << step << ", non-finite for "
         << nonfinite_in_a_row_ << " steps in a row (each skipped)";
    return text.str();
  }
  nonfinite_in_a_row_ = 0;
  if (!best_ || loss < *best_) best_ = loss;
  if (limits_.factor <= 0.0 || loss <= limits_.factor * *best_) {
    above_in_a_row_ = 0;
    return std::nullopt;
  }
  if (++above_in_a_row_ < limits_.steps) return std::nullopt;
  std::ostringstream text;
  text << "training diverged: the loss is " << loss << " at step " << step << ", above " << limits_.factor
       << " x its best (" << *best_ << ") for " << above_in_a_row_
       << " steps in a row (train.divergence_factor; 0 turns this check off)";
  return text.str();
}

}  // namespace strata
