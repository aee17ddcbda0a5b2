#pragma once
// How a run's losses compare with the reference run's: identical, within tolerance or diverged
// for stacks that should not change the math; an optimizer comparison (which ends lower) when the
// manifests differ in the optimizer; not comparable when they train another model or other batches.
#include <cstdint>
#include <optional>
#include <string>

#include "ab_conditions.hpp"
#include "ab_run.hpp"

namespace strata {

// 1% of the loss: stacks that keep the arithmetic differ by 0, bf16 storage's rounding stays under
// it on the quickstart model (docs/benchmarks.md), and a stack that moves the loss by more has
// changed the result, which is what a neutral stack must not do.
inline constexpr double kDefaultTolerance = 1e-2;

struct AbSettings {
  double tolerance = kDefaultTolerance;
  bool tolerance_given = false;        // --tolerance on the command line
  std::optional<std::int64_t> last_k;  // --last-k; unset: default_last_k(steps)
};

// min(10, ceil(steps / 4)), at least 1: the end of the run, not one noisy step.
std::int64_t default_last_k(std::int64_t steps);
// The k a comparison of `steps` steps uses.
std::int64_t last_k_for(const AbSettings& settings, std::int64_t steps);
// "1.0e-02 (default)" or "5.0e-03 (--tolerance)".
std::string tolerance_text(const AbSettings& settings);

// One loss series against the reference's, at the steps both have (val: where both evaluated).
struct LossComparison {
  std::size_t points = 0;
  bool bitwise = true;
  std::int64_t last_k = 0;        // the window: the last k steps
  std::size_t window_points = 0;  // points in it (val: the evaluations made in those steps)
  double reference_mean = 0.0;    // mean loss over the last k steps
  double run_mean = 0.0;
  double mean_difference = 0.0;   // (run_mean - reference_mean) / |reference_mean|, signed
  double worst_difference = 0.0;  // the largest |run - reference| / |reference| at one step
  std::int64_t worst_step = 0;
};

struct AbVerdict {
  enum class Kind {
    reference,
    identical,
    within_tolerance,
    diverged,
    optimizer_comparison,
    training_comparison,  // what trains differs (and perhaps the optimizer too)
    not_comparable,
    failed,
    no_reference,
  } kind = Kind::reference;
  std::string label;  // short, for the table: "within tolerance", "optimizer comparison: lower val loss"
  std::string text;   // the whole verdict, with its figures
  std::optional<LossComparison> train;
  std::optional<LossComparison> val;
};

// The reference's own entry: "reference", or its failure.
AbVerdict reference_verdict(const AbRun& reference);
AbVerdict compare_runs(const AbRun& reference, const AbRun& run, const AbConditions& conditions,
                       const AbSettings& settings);

}  // namespace strata
