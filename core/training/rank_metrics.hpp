#pragma once
// Data parallel's figures across ranks, for rank 0 to report: each step's share of every rank (to
// the sinks), and the run's peaks and messages (to the log).
#include <cstdint>
#include <vector>

#include "core/device/allocator.hpp"
#include "core/distributed/data_parallel.hpp"
#include "strata/telemetry_sink.hpp"

namespace strata {

// Rank 0 logs every rank's peak memory by category, as the allocator measured it, and the median
// step's time in calls to the other ranks (waiting for them included) with the part of it that
// overlapped computing.
void log_ranks(DataParallel& parallel, const ArenaStats& stats, double median_step_ms, double median_communication_ms,
               double median_hidden_ms);

// Every rank's share of the step, for rank 0's sinks (empty elsewhere).
std::vector<RankStepMetrics> gather_rank_metrics(DataParallel& parallel, std::int64_t step, double communication_ms,
                                                 double hidden_ms, std::uint64_t bytes_sent, const ArenaStats& stats);

}  // namespace strata
