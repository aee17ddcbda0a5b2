#pragma once
// What `strata ab` reads back from one child run's JSONL: the per-step series and the summary.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/training/memory_timeline.hpp"
#include "strata/memory_category.hpp"

namespace strata {

struct AbStep {
  std::int64_t step = 0;
  double loss = 0.0;
  std::optional<double> val_loss;
  double ms = 0.0;
  std::uint64_t peak_device_bytes = 0;            // the peak within the step
  CategoryBytes peak_device_bytes_by_category{};  // each category's own peak within the step
  CategoryBytes device_bytes{};                   // live at the end of the step
  std::uint64_t host_bytes = 0;
};

// One data-parallel rank's share of a run (`strata ab --ranks N`), from the steps' `ranks` lists.
struct AbRank {
  int rank = 0;
  int zero = 0;
  std::uint64_t peak_device_bytes = 0;            // its largest step peak
  CategoryBytes peak_device_bytes_by_category{};  // each category's largest
  double communication_ms = 0.0;                  // per step, the median
  double hidden_ms = 0.0;                         // the part of it that overlapped computing, the median
};

struct AbRun {
  std::filesystem::path manifest;
  std::string label;  // the manifest's file name, made unique
  std::string stack;
  int exit_code = 0;
  std::string failure;  // the child's last stderr line (or why its metrics are unreadable) when it failed
  std::vector<AbStep> steps;
  // From the summary record.
  std::uint64_t peak_device_bytes = 0;
  CategoryBytes peak_device_bytes_by_category{};
  std::uint64_t peak_host_bytes = 0;
  double median_ms = 0.0;
  double tokens_per_s = 0.0;
  double final_loss = 0.0;
  std::optional<double> final_val_loss;
  std::uint64_t bytes_to_host = 0;
  std::uint64_t bytes_to_device = 0;
  double transfer_ms = 0.0;
  double exposed_transfer_ms = 0.0;
  // A phase controller's share ([predictor]); a run without one has backward_passes = steps.
  std::int64_t backward_passes = 0;
  std::int64_t predict_steps = 0;
  std::int64_t rollbacks = 0;
  double predictor_ms = 0.0;
  std::uint64_t predictor_bytes = 0;  // host + device, as the arenas counted them
  bool complete = false;              // a summary record was read
  std::vector<AbRank> ranks;          // a data-parallel run's, by rank; empty for one process
  // With --html: the memory timeline of the step the planner's dry run predicts (the run's third),
  // as the run measured it and as the dry run predicted it; why one is missing otherwise.
  std::optional<MemoryTimeline> measured_timeline;
  std::optional<MemoryTimeline> predicted_timeline;
  std::string timeline_note;

  bool failed() const { return exit_code != 0 || !complete; }
};

AbRun read_ab_run(const std::filesystem::path& jsonl);  // throws std::runtime_error on unreadable records

}  // namespace strata
