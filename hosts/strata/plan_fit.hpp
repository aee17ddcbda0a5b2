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

}  // namespace strata
