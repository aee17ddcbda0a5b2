#pragma once
// One home's memory timeline within a step (core/training/memory_timeline.hpp) as a stacked area
// per category, each pass of the step shaded behind it and the peak marked, in inline SVG. Each
// column names, on hover, where in the step it is and what it holds.
#include <cstdint>
#include <string>

#include "core/training/memory_timeline.hpp"

namespace strata {

enum class TimelineHome { device, host };

// The largest total bytes the timeline reaches on `home`.
std::uint64_t timeline_peak(const MemoryTimeline& timeline, TimelineHome home);
// `y_max`: the top of the axis, so that charts drawn side by side share it (0: this one's peak).
std::string timeline_svg(const MemoryTimeline& timeline, TimelineHome home, const std::string& title,
                         std::uint64_t y_max = 0);

}  // namespace strata
