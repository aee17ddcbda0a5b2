#pragma once
// `strata ab`'s outputs: the comparison table for the terminal, and a self-contained HTML report
// (inline SVG, nothing fetched) with loss curves and a device-memory timeline per run.
#include <ostream>
#include <vector>

#include "ab_run.hpp"

namespace strata {

void print_ab_table(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts);
void write_ab_html(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts);

}  // namespace strata
