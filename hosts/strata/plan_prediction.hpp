#pragma once
// How `strata plan` and `strata validate` show the planner's prediction (core/planner/): a few
// lines for people, a JSON object for tools, and the warning when the device peak will not fit.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/planner/memory_prediction.hpp"

namespace strata {

void print_prediction(std::ostream& out, const MemoryPrediction& prediction);
nlohmann::json prediction_json(const MemoryPrediction& prediction);
// "warning: ..." when the predicted device peak exceeds `memory_limit` (0: none), naming the
// category that dominates the peak; nothing otherwise.
std::optional<std::string> over_limit_warning(const MemoryPrediction& prediction, std::uint64_t memory_limit);

}  // namespace strata
