#pragma once
// How `strata plan` and `strata validate` show the planner's prediction (core/planner/): a few
// lines for people, a JSON object for tools, and the warning when the device peak will not fit.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/planner/memory_prediction.hpp"

namespace strata {

// `calibration`: the one the step time was priced with (null: none, and the output says how to
// make one).
void print_prediction(std::ostream& out, const MemoryPrediction& prediction, const Calibration* calibration);
nlohmann::json prediction_json(const MemoryPrediction& prediction, const Calibration* calibration);
// "warning: ..." when the predicted device peak exceeds `memory_limit` (0: none), naming the
// category that dominates the peak; nothing otherwise.
std::optional<std::string> over_limit_warning(const MemoryPrediction& prediction, std::uint64_t memory_limit);
// `strata plan --ranks N`: each rank's device peak by category at the manifest's zero stage
// (`ranks`, one prediction a rank), beside the ideal: zero 0's rank 0 (`replicated`) with the
// optimizer state (zero 1 and 2) and the gradients (zero 2) divided by N.
void print_rank_predictions(std::ostream& out, int zero, const std::vector<MemoryPrediction>& ranks,
                            const MemoryPrediction& replicated);

}  // namespace strata
