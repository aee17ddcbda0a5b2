#pragma once
// `strata plan --fit`: prints the stacks on the memory x time front, the fastest that fits, and
// writes it as a manifest (core/planner/stack_fit.hpp does the search).
#include <optional>
#include <string>

#include "core/manifest/manifest.hpp"
#include "core/planner/calibration.hpp"
#include "core/plugin/plugin_registry.hpp"

namespace strata {

// Exit 0 with a stack that fits (written to `write` when given), 1 when none does.
int run_fit(const Manifest& manifest, PluginRegistry& registry, const Calibration& calibration,
            const std::string& budget_text, bool allow_numerics, const std::optional<std::string>& write);

// For a manifest whose predicted device peak exceeds its memory_limit: the stack `--fit` would pick
// for that limit, keeping the numbers, when a calibration ranks them and a search is quick (a dry
// run of `dry_run_seconds` under 50 ms); otherwise the command that searches.
std::string fit_suggestion(const Manifest& manifest, PluginRegistry& registry, const Calibration* calibration,
                           double dry_run_seconds);

}  // namespace strata
