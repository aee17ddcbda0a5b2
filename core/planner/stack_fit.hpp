#pragma once
// `strata plan --fit` (docs/architecture.md, "The planner"): the stacks the installed plugins
// offer for a manifest — checkpointing, offload and streaming, the disk tier, flash attention,
// micro-batches, the fused update, and with `allow_numerics` bf16, int8, nf4 and 8-bit state — each
// planned by the dry run and priced by the calibration; the ones on the memory x time Pareto
// front, and the fastest that fits a budget.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/manifest/manifest.hpp"
#include "core/planner/calibration.hpp"
#include "core/planner/memory_prediction.hpp"
#include "core/plugin/plugin_registry.hpp"

namespace strata {

struct FitBudget {
  std::uint64_t device = 0;  // 0: no bound on that home
  std::uint64_t host = 0;
  std::uint64_t disk = 0;
};

// "device=8GiB[,host=24GiB][,disk=100GiB]"; throws ManifestError naming what is wrong.
FitBudget parse_fit_budget(const std::string& text);

struct FitCandidate {
  std::string description;    // "checkpoint every = 1, offload optimizer_state = host, micro_batches = 2"
  std::string manifest_text;  // the whole manifest for this stack (TOML)
  std::optional<MemoryPrediction> prediction;  // empty when the host refused the stack
  std::string refusal;
  bool changes_numerics = false;  // a storage precision or optimizer other than the manifest's
  bool fits = false;

  std::uint64_t device_peak() const { return prediction ? prediction->device.peak_total : 0; }
  double step_ms() const { return prediction && prediction->step ? prediction->step->total_ms : 0.0; }
};

struct FitResult {
  std::vector<FitCandidate> candidates;
  std::vector<std::size_t> front;            // device peak x step time, ascending in device peak
  std::optional<std::size_t> chosen;         // the fastest that fits
  std::optional<std::size_t> smallest;       // the smallest device peak reached, fitting or not
  std::optional<std::size_t> smallest_host;  // of the stacks within the device budget, the smallest host peak
};

FitResult fit_stack(const Manifest& manifest, PluginRegistry& registry, const Calibration& calibration,
                    const FitBudget& budget, bool allow_numerics,
                    const std::function<void(std::size_t done, std::size_t total)>& progress = {});

}  // namespace strata
