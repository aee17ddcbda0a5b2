#include "ab_verdict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

namespace strata {

namespace {

std::string format(const char* pattern, double value) {
  char text[48];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

// |run - reference| / |reference|; a non-finite loss on either side is the worst difference.
double relative_difference(double reference, double run) {
  if (reference == run) return 0.0;
  const double relative = std::abs(run - reference) / std::max(std::abs(reference), 1e-12);
  return std::isfinite(relative) ? relative : INFINITY;
}

// (reference step, reference loss, run loss) at every step both series have.
struct Pair {
  std::int64_t step;
  double reference;
  double run;
};

LossComparison compare_series(const std::vector<Pair>& pairs, std::int64_t last_k) {
  LossComparison comparison;
  comparison.points = pairs.size();
  comparison.last_k = last_k;
  const std::int64_t last_step = pairs.back().step;
  std::size_t in_window = 0;
  for (const Pair& pair : pairs) {
    comparison.bitwise &= pair.reference == pair.run;
    const double relative = relative_difference(pair.reference, pair.run);
    if (relative > comparison.worst_difference) {
      comparison.worst_difference = relative;
      comparison.worst_step = pair.step;
    }
    if (pair.step > last_step - last_k) {
      comparison.reference_mean += pair.reference;
      comparison.run_mean += pair.run;
      ++in_window;
    }
  }
  comparison.window_points = in_window;
  comparison.reference_mean /= static_cast<double>(in_window);
  comparison.run_mean /= static_cast<double>(in_window);
  comparison.mean_difference =
      (comparison.run_mean - comparison.reference_mean) / std::max(std::abs(comparison.reference_mean), 1e-12);
  if (comparison.reference_mean == comparison.run_mean) comparison.mean_difference = 0.0;  // also both infinite
  if (std::isnan(comparison.mean_difference)) comparison.mean_difference = INFINITY;
  if (comparison.worst_step == 0) comparison.worst_step = pairs.front().step;
  return comparison;
}

bool within(const LossComparison& comparison, double tolerance) {
  return std::abs(comparison.mean_difference) <= tolerance && comparison.worst_difference <= tolerance;
}

// "train last-2 mean", or "val at step 6" when one evaluation falls in the window.
std::string window_text(const std::string& name, const LossComparison& c, std::int64_t last_step) {
  if (c.window_points == 1) return name + " at step " + std::to_string(last_step);
  return name + " last-" + std::to_string(c.last_k) + " mean";
}

// "train last-2 mean +1.2e-03, worst 4.5e-03 at step 3"
std::string differences_text(const std::string& name, const LossComparison& c, std::int64_t last_step,
                             double tolerance) {
  const auto over = [&](double value) { return std::abs(value) <= tolerance ? "" : " (over)"; };
  return window_text(name, c, last_step) + " " + format("%+.1e", c.mean_difference) + over(c.mean_difference) +
         ", worst " + format("%.1e", c.worst_difference) + " at step " + std::to_string(c.worst_step) +
         over(c.worst_difference);
}

// "val last-2 mean 2.1950 vs 2.2010 (-2.7e-03), worst 4.0e-03 at step 5"
std::string means_text(const std::string& name, const LossComparison& c, std::int64_t last_step) {
  return window_text(name, c, last_step) + " " + format("%.4f", c.run_mean) + " vs " +
         format("%.4f", c.reference_mean) + " (" + format("%+.1e", c.mean_difference) + "), worst " +
         format("%.1e", c.worst_difference) + " at step " + std::to_string(c.worst_step);
}

// "1 val loss", "6 train losses"
std::string count(std::size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "es");
}

std::string joined(const std::vector<std::string>& items, std::size_t at_most) {
  std::string text;
  for (std::size_t i = 0; i < items.size() && i < at_most; ++i) text += (i > 0 ? ", " : "") + items[i];
  if (items.size() > at_most) text += " and " + std::to_string(items.size() - at_most) + " more";
  return text;
}

AbVerdict make(AbVerdict::Kind kind, std::string label, std::string text) {
  AbVerdict verdict;
  verdict.kind = kind;
  verdict.label = std::move(label);
  verdict.text = std::move(text);
  return verdict;
}

std::string failure_text(const AbRun& run) {
  std::string text = "failed (exit " + std::to_string(run.exit_code) + ")";
  if (run.exit_code == 0 && !run.complete) text += ", no summary record";
  return text;
}

}  // namespace

std::int64_t default_last_k(std::int64_t steps) {
  return std::max<std::int64_t>(1, std::min<std::int64_t>(10, (steps + 3) / 4));
}

std::int64_t last_k_for(const AbSettings& settings, std::int64_t steps) {
  return std::max<std::int64_t>(1, settings.last_k.value_or(default_last_k(steps)));
}

std::string tolerance_text(const AbSettings& settings) {
  return format("%.1e", settings.tolerance) + (settings.tolerance_given ? " (--tolerance)" : " (default)");
}

AbVerdict reference_verdict(const AbRun& reference) {
  if (reference.failed())
    return make(AbVerdict::Kind::failed, failure_text(reference),
                "reference " + failure_text(reference) + (reference.failure.empty() ? "" : ": " + reference.failure));
  return make(AbVerdict::Kind::reference, "reference", "reference");
}

AbVerdict compare_runs(const AbRun& reference, const AbRun& run, const AbConditions& conditions,
                       const AbSettings& settings) {
  if (run.failed())
    return make(AbVerdict::Kind::failed, failure_text(run),
                failure_text(run) + (run.failure.empty() ? "" : ": " + run.failure));
  if (reference.failed())
    return make(
        AbVerdict::Kind::no_reference, "no reference",
        "no reference: " + reference.label + " " + failure_text(reference) + ", so there is nothing to compare with");
  if (conditions.not_comparable)
    return make(AbVerdict::Kind::not_comparable, "not comparable: " + *conditions.not_comparable,
                "not comparable: " + *conditions.not_comparable + "; losses not compared");

  std::map<std::int64_t, const AbStep*> reference_steps;
  for (const AbStep& step : reference.steps) reference_steps[step.step] = &step;
  std::vector<Pair> train, val;
  for (const AbStep& step : run.steps) {
    const auto found = reference_steps.find(step.step);
    if (found == reference_steps.end()) continue;
    train.push_back({step.step, found->second->loss, step.loss});
    if (step.val_loss && found->second->val_loss) val.push_back({step.step, *found->second->val_loss, *step.val_loss});
  }
  if (train.empty())
    return make(AbVerdict::Kind::not_comparable, "not comparable: no common steps",
                "not comparable: the runs logged no step in common");

  AbVerdict verdict;
  const std::int64_t k = last_k_for(settings, static_cast<std::int64_t>(train.size()));
  verdict.train = compare_series(train, k);
  if (!val.empty() && !conditions.val_not_comparable) verdict.val = compare_series(val, k);
  const double tolerance = settings.tolerance;
  const std::int64_t last_step = train.back().step;
  std::string notes;
  if (conditions.val_not_comparable) notes += "; val not compared: " + *conditions.val_not_comparable;
  notes += "; tolerance " + tolerance_text(settings);
  std::string figures = differences_text("train", *verdict.train, last_step, tolerance);
  if (verdict.val) figures += "; " + differences_text("val", *verdict.val, val.back().step, tolerance);
  figures += notes;

  const bool bitwise = verdict.train->bitwise && (!verdict.val || verdict.val->bitwise);
  if (bitwise) {
    verdict.kind = AbVerdict::Kind::identical;
    verdict.label = "identical";
    verdict.text = "identical: " + count(verdict.train->points, "train loss") +
                   (verdict.val ? " and " + count(verdict.val->points, "val loss") : "") + " bitwise equal";
    if (!conditions.optimizer_changes.empty())
      verdict.text += " (the optimizer settings differ: " + joined(conditions.optimizer_changes, 3) + ")";
    if (conditions.training_change) verdict.text += " (" + *conditions.training_change + ")";
    return verdict;
  }
  if (!conditions.optimizer_changes.empty() || conditions.training_change) {
    // Another optimizer is meant to change the trajectory: say which run ends lower, on held-out
    // data when both evaluated, and by how much.
    const bool on_val = verdict.val.has_value();
    const LossComparison& basis = on_val ? *verdict.val : *verdict.train;
    const std::string which = on_val ? "val loss" : "train loss";
    std::string outcome;
    if (!std::isfinite(basis.run_mean))
      outcome = "non-finite " + which;
    else if (std::abs(basis.mean_difference) <= tolerance)
      outcome = "same " + which + " within tolerance";
    else
      outcome = (basis.mean_difference < 0 ? "lower " : "higher ") + which;
    // Another training (what trains differs) or another optimizer on the same training.
    const bool training = conditions.training_change.has_value();
    std::string changes = training ? *conditions.training_change : std::string();
    if (!conditions.optimizer_changes.empty())
      changes += (changes.empty() ? "" : "; ") + joined(conditions.optimizer_changes, 3);
    const std::string kind = training ? "training comparison" : "optimizer comparison";
    verdict.kind = training ? AbVerdict::Kind::training_comparison : AbVerdict::Kind::optimizer_comparison;
    verdict.label = kind + ": " + outcome;
    verdict.text = kind + " (" + changes + "): " + outcome + " than " + reference.label + ": ";
    if (verdict.val) verdict.text += means_text("val", *verdict.val, val.back().step) + "; ";
    verdict.text += means_text("train", *verdict.train, last_step) + notes;
    return verdict;
  }
  const bool close = within(*verdict.train, tolerance) && (!verdict.val || within(*verdict.val, tolerance));
  verdict.kind = close ? AbVerdict::Kind::within_tolerance : AbVerdict::Kind::diverged;
  verdict.label = close ? "within tolerance" : "diverged";
  verdict.text = verdict.label + ": " + figures;
  return verdict;
}

}  // namespace strata
