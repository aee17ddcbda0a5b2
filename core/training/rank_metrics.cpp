#include "core/training/rank_metrics.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/util/format_bytes.hpp"

namespace strata {

// Rank 0 logs every rank's peak memory by category, as the allocator measured it, and the median
// step's time in calls to the other ranks (waiting for them included) with the part of it that
// overlapped computing.
void log_ranks(DataParallel& parallel, const ArenaStats& stats, double median_step_ms, double median_communication_ms,
               double median_hidden_ms) {
  Communicator& communicator = parallel.communicator();
  const auto peak = [&](MemoryCategory category) {
    return static_cast<double>(stats.peak[static_cast<std::size_t>(category)]);
  };
  const std::vector<double> mine{median_communication_ms,
                                 static_cast<double>(communicator.bytes_sent()),
                                 static_cast<double>(stats.peak_total),
                                 peak(MemoryCategory::weights),
                                 peak(MemoryCategory::grads),
                                 peak(MemoryCategory::optimizer),
                                 peak(MemoryCategory::activations),
                                 median_step_ms,
                                 median_hidden_ms};
  const std::vector<double> all = all_gather_doubles(communicator, mine);
  if (communicator.rank() != 0) return;
  const auto bytes = [](double value) { return format_bytes(static_cast<std::uint64_t>(value)); };
  for (int r = 0; r < communicator.size(); ++r) {
    const double* v = all.data() + static_cast<std::size_t>(r) * mine.size();
    spdlog::info(
        "rank {} (zero {}): peak {} (weights {}, gradients {}, optimizer state {}, activations {}); communication "
        "{:.0f} ms of the median step's {:.0f} ms ({:.1f}%), {:.0f} ms of it hidden behind computing ({:.0f}%), {} "
        "sent in the run",
        r, parallel.zero(), bytes(v[2]), bytes(v[3]), bytes(v[4]), bytes(v[5]), bytes(v[6]), v[0], v[7],
        100.0 * v[0] / std::max(v[7], 1e-9), v[8], 100.0 * v[8] / std::max(v[0], 1e-9), bytes(v[1]));
  }
}

// Every rank's share of the step, for rank 0's sinks (empty elsewhere).
std::vector<RankStepMetrics> gather_rank_metrics(DataParallel& parallel, std::int64_t step, double communication_ms,
                                                 double hidden_ms, std::uint64_t bytes_sent, const ArenaStats& stats) {
  Communicator& communicator = parallel.communicator();
  std::vector<double> mine{communication_ms, static_cast<double>(bytes_sent),
                           static_cast<double>(stats.window_peak_total), hidden_ms};
  for (std::uint64_t bytes : stats.window_peak) mine.push_back(static_cast<double>(bytes));
  const std::vector<double> all = all_gather_doubles(communicator, mine);
  std::vector<RankStepMetrics> ranks;
  if (communicator.rank() != 0) return ranks;
  for (int r = 0; r < communicator.size(); ++r) {
    const double* v = all.data() + static_cast<std::size_t>(r) * mine.size();
    RankStepMetrics metrics;
    metrics.step = step;
    metrics.rank = r;
    metrics.ranks = communicator.size();
    metrics.zero = parallel.zero();
    metrics.communication_ms = v[0];
    metrics.hidden_ms = v[3];
    metrics.bytes_sent = static_cast<std::uint64_t>(v[1]);
    metrics.peak_device_bytes = static_cast<std::uint64_t>(v[2]);
    for (std::size_t c = 0; c < metrics.peak_device_bytes_by_category.size(); ++c)
      metrics.peak_device_bytes_by_category[c] = static_cast<std::uint64_t>(v[4 + c]);
    ranks.push_back(metrics);
  }
  return ranks;
}

}  // namespace strata
