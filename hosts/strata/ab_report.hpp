#pragma once
// `strata ab`'s outputs: the comparison table for the terminal, and a self-contained HTML report
// (inline SVG, nothing fetched) with loss curves and a device-memory timeline per run.
#include <ostream>
#include <vector>

#include "ab_run.hpp"
#include "ab_verdict.hpp"

namespace strata {

// The table: one column per run, its verdict's label in the last row.
void print_ab_table(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts);
// Each verdict in full, under a line saying how losses were compared (window, tolerance, its source).
void print_ab_verdicts(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts,
                       const AbSettings& settings);
void write_ab_html(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts,
                   const AbSettings& settings);

}  // namespace strata
