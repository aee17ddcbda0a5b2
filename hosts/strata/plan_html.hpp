#pragma once
// `strata plan --html`: the prediction as a page, with the predicted memory of one step, device
// and host, as stacked areas per category, pass by pass (hosts/strata/timeline_svg.hpp).
#include <ostream>

#include "core/manifest/manifest.hpp"
#include "core/planner/memory_prediction.hpp"

namespace strata {

void write_plan_html(std::ostream& out, const Manifest& manifest, const MemoryPrediction& prediction,
                     const Calibration* calibration, const MemoryTimeline& timeline);

}  // namespace strata
