// `strata plan --fit` (core/planner/stack_fit.hpp): the stack it picks for a budget trains inside
// that budget, with memory_limit set to it; a budget below every stack's peak picks nothing and
// names the smallest peak reachable.
#include <gtest/gtest.h>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/planner/stack_fit.hpp"
#include "core/training/training_run.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

// Every op at one rate: the search ranks by it, and no test times anything.
Calibration flat_calibration() {
  Calibration calibration;
  for (const char* op : {"matmul_forward_f32", "matmul_backward_f32", "scale", "copy"})
    calibration.ops[op] = {{1e9, 1.0}};
  calibration.path = "flat";
  return calibration;
}

TEST(StackFit, ReadsABudgetAndNamesWhatIsWrongWithOne) {
  const FitBudget budget = parse_fit_budget("device=8GiB,host=24GiB,disk=100GiB");
  EXPECT_EQ(budget.device, 8ull << 30);
  EXPECT_EQ(budget.host, 24ull << 30);
  EXPECT_EQ(budget.disk, 100ull << 30);
  EXPECT_EQ(parse_fit_budget("device=512MiB").host, 0u);
  for (const char* bad : {"host=8GiB", "device=lots", "device", "gpu=8GiB", "device=0"}) {
    try {
      (void)parse_fit_budget(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ManifestError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(StackFit, TheStackItPicksTrainsInsideTheBudget) {
  const auto dir = test::temporary_directory("stack_fit");
  test::write_text(dir / "m.toml", test::tiny_manifest("[optimizer]\nplugin = \"adamw\"\n"));
  PluginRegistry registry;
  registry.scan_search_path(plugin_search_path({}));
  const Manifest manifest = load_manifest(dir / "m.toml", {"train.steps=3"});
  const Calibration calibration = flat_calibration();
  // The whole front, then a budget between its smallest and largest peaks.
  const FitResult open = fit_stack(manifest, registry, calibration, FitBudget{1ull << 40, 0, 0}, false);
  ASSERT_GE(open.front.size(), 2u);
  const std::uint64_t smallest = open.candidates[open.front.front()].device_peak();
  const std::uint64_t largest = open.candidates[open.front.back()].device_peak();
  ASSERT_LT(smallest, largest);
  const std::uint64_t budget = smallest + (largest - smallest) / 3;
  const FitResult fit = fit_stack(manifest, registry, calibration, FitBudget{budget, 0, 0}, false);
  ASSERT_TRUE(fit.chosen);
  const FitCandidate& chosen = fit.candidates[*fit.chosen];
  EXPECT_LE(chosen.device_peak(), budget);
  EXPECT_FALSE(chosen.changes_numerics);
  for (const FitCandidate& candidate : fit.candidates) {  // the fastest of those that fit
    if (candidate.fits) {
      EXPECT_GE(candidate.step_ms(), chosen.step_ms()) << candidate.description;
    }
  }
  // Trained as written, with memory_limit = the budget: it fits, and measures what was planned.
  test::write_text(dir / "chosen.toml", chosen.manifest_text);
  const Manifest written = load_manifest(dir / "chosen.toml");
  EXPECT_EQ(written.device.memory_limit, budget);
  const TrainResult run = run_training(written, registry, TrainOptions{});
  EXPECT_LE(run.summary.peak_device_bytes, budget) << chosen.description;
  EXPECT_LE(run.summary.peak_device_bytes, chosen.device_peak()) << chosen.description;

  // Below the smallest peak: nothing is chosen, and the smallest is named.
  const FitResult none = fit_stack(manifest, registry, calibration, FitBudget{smallest - 1, 0, 0}, false);
  EXPECT_FALSE(none.chosen);
  ASSERT_TRUE(none.smallest);
  EXPECT_EQ(none.candidates[*none.smallest].device_peak(), smallest);
}

}  // namespace
}  // namespace strata
