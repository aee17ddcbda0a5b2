#include "plan_fit.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "commands.hpp"
#include "core/manifest/manifest_edit.hpp"
#include "core/planner/stack_fit.hpp"
#include "core/util/atomic_file.hpp"
#include "core/util/format_bytes.hpp"
#include "exit_codes.hpp"

namespace strata {

namespace {

std::string budget_text(const FitBudget& budget) {
  std::string text = "device " + format_bytes(budget.device);
  if (budget.host > 0) text += ", host " + format_bytes(budget.host);
  if (budget.disk > 0) text += ", disk " + format_bytes(budget.disk);
  return text;
}

void print_row(const FitCandidate& candidate) {
  const MemoryPrediction& p = *candidate.prediction;
  std::printf("  %12s %12s %12s %12s %10.1f  %-4s %s%s\n", format_bytes(p.device.peak_total).c_str(),
              format_bytes(p.host.peak_total).c_str(), format_bytes(p.resident_bytes()).c_str(),
              p.disk ? format_bytes(p.disk->peak_total).c_str() : "-", candidate.step_ms(),
              candidate.fits ? "yes" : "no", candidate.description.c_str(),
              candidate.changes_numerics ? "  [changes the numbers]" : "");
}

// The category holding the most of a home's peak.
std::string dominant(const HomePrediction& home) {
  const CategoryBytes& held = home.at_peak;
  const auto largest = static_cast<std::size_t>(std::max_element(held.begin(), held.end()) - held.begin());
  return std::string(category_name(kAllMemoryCategories[largest])) + " (" + format_bytes(held[largest]) + " of " +
         format_bytes(home.peak_total) + ")";
}

// The chosen stack as the user's own file edited (its comments, key order and untouched values
// kept: core/manifest/manifest_edit.hpp), or the whole document where that cannot be done.
std::string written_manifest(const Manifest& manifest, const FitCandidate& chosen) {
  std::ifstream in(manifest.path, std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.bad()) {
    try {
      if (auto edited = edit_manifest_text(original, toml::parse(chosen.manifest_text))) return *edited;
    } catch (const toml::parse_error&) {
    }
  }
  return chosen.manifest_text;
}

}  // namespace

std::string fit_suggestion(const Manifest& manifest, PluginRegistry& registry, const Calibration* calibration,
                           double dry_run_seconds) {
  const std::uint64_t limit = manifest.device.memory_limit;
  const std::string command = "`strata plan " + manifest.path.string() + " --fit device=" + size_text(limit) + "`";
  if (calibration == nullptr)
    return command + " searches for a stack that fits (timing this machine's ops first: there is no calibration)";
  if (dry_run_seconds > 0.05) return command + " searches for a stack that fits";  // hundreds of dry runs
  const FitResult result = fit_stack(manifest, registry, *calibration, FitBudget{limit, 0, 0}, false);
  if (!result.chosen)
    return "no stack of the installed plugins fits it with these numerics; " + command +
           " --allow-numerics tries bf16, int8, nf4 and 8-bit state";
  const FitCandidate& chosen = result.candidates[*result.chosen];
  char step[32];
  std::snprintf(step, sizeof step, "%.1f ms", chosen.step_ms());
  return command + " picks: " + chosen.description + " (device " + format_bytes(chosen.device_peak()) +
         ", predicted step " + step + ")";
}

int run_fit(const Manifest& manifest, PluginRegistry& registry, const Calibration& calibration,
            const std::string& budget_spec, bool allow_numerics, const std::optional<std::string>& write) {
  const FitBudget budget = parse_fit_budget(budget_spec);
  if (write) check_output_file("--write", *write);
  const FitResult result =
      fit_stack(manifest, registry, calibration, budget, allow_numerics, [](std::size_t done, std::size_t total) {
        if (done % 16 == 0 || done == total) std::fprintf(stderr, "\rplanning stacks: %zu of %zu", done, total);
        if (done == total) std::fprintf(stderr, "\n");
      });
  std::size_t planned = 0, fitting = 0;
  for (const FitCandidate& candidate : result.candidates) {
    planned += candidate.prediction ? 1 : 0;
    fitting += candidate.fits ? 1 : 0;
  }
  std::printf("fit into %s: %zu stacks, %zu planned (%zu refused by the host), %zu fit; step times from %s\n",
              budget_text(budget).c_str(), result.candidates.size(), planned, result.candidates.size() - planned,
              fitting, calibration.path.string().c_str());
  std::printf("the memory x time front (each stack faster than every one with a smaller device peak):\n");
  std::printf("  %12s %12s %12s %12s %10s  %-4s %s\n", "device peak", "host peak", "RSS estimate", "disk peak",
              "step ms", "fits", "stack");
  for (const std::size_t i : result.front) print_row(result.candidates[i]);
  if (!result.chosen) {
    if (!result.smallest) {
      std::cerr << "strata plan: --fit: the host refused every stack; the first refusal: "
                << result.candidates.front().refusal << '\n';
      return kExitInvalidInput;
    }
    if (result.smallest_host) {  // the device fits; the host (or the disk) does not
      const FitCandidate& lightest = result.candidates[*result.smallest_host];
      std::cerr << "strata plan: nothing fits " << budget_text(budget)
                << ": within the device budget, the smallest host peak reachable is "
                << format_bytes(lightest.prediction->host.peak_total) << " (" << lightest.description
                << "), dominated by " << dominant(lightest.prediction->host) << '\n';
      return kExitRunFailed;
    }
    const FitCandidate& smallest = result.candidates[*result.smallest];
    std::cerr << "strata plan: nothing fits " << budget_text(budget) << ": the smallest device peak reachable is "
              << format_bytes(smallest.device_peak()) << " (" << smallest.description << "), dominated by "
              << dominant(smallest.prediction->device) << '\n';
    return kExitRunFailed;
  }
  const FitCandidate& chosen = result.candidates[*result.chosen];
  std::printf("fastest that fits: %s\n  device %s, host %s (RSS estimate %s), predicted step %.1f ms%s\n",
              chosen.description.c_str(), format_bytes(chosen.device_peak()).c_str(),
              format_bytes(chosen.prediction->host.peak_total).c_str(),
              format_bytes(chosen.prediction->resident_bytes()).c_str(), chosen.step_ms(),
              chosen.changes_numerics ? " (changes the numbers: --allow-numerics)" : "");
  if (write) {
    write_file_atomically(*write, "# Written by `strata plan --fit " + budget_spec + "` for " + manifest.path.string() +
                                      ": " + chosen.description + "\n" + written_manifest(manifest, chosen));
    std::printf("wrote %s\n", write->c_str());
  }
  return kExitSuccess;
}

}  // namespace strata
