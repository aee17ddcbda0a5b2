#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "strata/memory_category.hpp"
#include "strata/phase.hpp"
#include "strata/status.hpp"

namespace strata {

struct RunInfo {
  std::string manifest_path;
  std::string stack;  // "adamw + fp32 + checkpoint", for headers
  std::int64_t total_steps = 0;
  std::int64_t start_step = 0;  // > 0 when resuming
  std::int64_t tokens_per_step = 0;
  std::int64_t parameter_count = 0;
  std::uint64_t device_memory_limit = 0;  // 0: no limit
};

struct StepMetrics {
  std::int64_t step = 0;  // 1-based
  std::int64_t total_steps = 0;
  Phase phase = Phase::full;
  double loss = 0.0;
  std::optional<double> val_loss;
  double lr = 0.0;
  double grad_norm = 0.0;
  bool skipped = false;
  double ms = 0.0;
  double tokens_per_s = 0.0;
  CategoryBytes device_bytes{};                   // live at the end of the step
  std::uint64_t peak_device_bytes = 0;            // peak of the total within the step
  CategoryBytes peak_device_bytes_by_category{};  // each category's own peak within the step
  std::uint64_t host_bytes = 0;                   // live host (offload arena) bytes at the end of the step
  // ABI 1.1: residency transfers within the step, as the copy stream measured them.
  std::uint64_t bytes_to_host = 0;
  std::uint64_t bytes_to_device = 0;
  double transfer_ms = 0.0;          // time the copies took
  double exposed_transfer_ms = 0.0;  // of which compute waited for (synchronous moves included)
  // ABI 4.1: what the driver reports in use on the whole device at the end of the step (CUDA:
  // cudaMemGetInfo's total - free, so the context, cuBLAS and other processes too), to cross-check
  // the arena's accounting; 0 on the CPU.
  std::uint64_t driver_device_bytes = 0;
  // ABI 7.0: the loss scale the step ran with (1 unless the precision policy scales the loss).
  double loss_scale = 1.0;
  // ABI 8.0: with a phase controller ([predictor]): whether the step ran a backward pass, whether
  // a predict step's guardrail rolled the weights back, and the time of the controller's calls.
  bool backward = true;
  bool rolled_back = false;
  double predictor_ms = 0.0;
};

// ABI 9.5: the disk tier's share of one step ([device] disk_path), for a sink that takes it
// (TelemetrySink::on_step_disk). Bytes moved and times are the step's; the tier's writes of one
// step may land during the next (written back behind compute), and are counted where they land.
struct DiskStepMetrics {
  std::int64_t step = 0;
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  double busy_ms = 0.0;          // the tier's thread with a transfer in hand
  double waited_ms = 0.0;        // compute standing still until a transfer landed
  std::uint64_t disk_bytes = 0;  // bytes whose only copy is on disk at the end of the step
  std::uint64_t file_bytes = 0;  // the tier's file: extents reserved so far
};

// ABI 9.8: one rank's share of a step of a data-parallel run (mpirun -np N strata train), handed
// to rank 0's sinks (TelemetrySink::on_step_rank) for every rank, just before on_step.
struct RankStepMetrics {
  std::int64_t step = 0;
  int rank = 0;
  int ranks = 1;
  int zero = 0;                   // [distributed] zero
  double communication_ms = 0.0;  // in calls to the other ranks, waiting for them included
  double hidden_ms = 0.0;         // of which overlapped compute
  std::uint64_t bytes_sent = 0;
  std::uint64_t peak_device_bytes = 0;            // peak of the total within the step
  CategoryBytes peak_device_bytes_by_category{};  // each category's own peak within the step
};

struct PluginMemoryUse {
  std::string_view plugin;
  std::uint64_t host_bytes = 0;
  std::uint64_t device_bytes = 0;
  std::uint64_t bytes_copied = 0;  // both ways
};

struct RunSummary {
  std::int64_t steps = 0;
  double first_loss = 0.0;
  double final_loss = 0.0;
  std::optional<double> final_val_loss;
  double median_ms = 0.0;
  double tokens_per_s = 0.0;
  std::uint64_t peak_device_bytes = 0;
  CategoryBytes peak_device_bytes_by_category{};
  std::uint64_t peak_host_bytes = 0;
  double seconds = 0.0;
  // ABI 1.1
  std::uint64_t bytes_to_host = 0;  // whole run
  std::uint64_t bytes_to_device = 0;
  double transfer_ms = 0.0;
  double exposed_transfer_ms = 0.0;
  std::uint64_t peak_driver_device_bytes = 0;  // ABI 4.1: the largest driver_device_bytes of any step
  std::int64_t skipped_steps = 0;              // ABI 7.0: steps whose update was skipped (non-finite grads)
  // ABI 8.0: the phase controller's share. Backward passes run (= steps without a controller),
  // predict steps, rollbacks, the controller's time and the memory it holds (host and device
  // arenas, as the allocators count it under the plugin's name).
  std::int64_t backward_passes = 0;
  std::int64_t predict_steps = 0;
  std::int64_t rollbacks = 0;
  double predictor_ms = 0.0;
  std::uint64_t predictor_host_bytes = 0;
  std::uint64_t predictor_device_bytes = 0;
  // ABI 9.0: what each plugin that asked the host for memory (HostServices::memory) holds at the end
  // of the run, and what it copied.
  std::span<const PluginMemoryUse> plugin_memory;
};

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  // Each may throw: the host reports any exception with the plugin's name, as it does an error.
  virtual Status on_run_start(const RunInfo& info) = 0;
  virtual Status on_step(const StepMetrics& metrics) = 0;
  virtual Status on_run_end(const RunSummary& summary) = 0;
  // (optional, since 9.5) The disk tier's share of a step, just before on_step of the same step;
  // called only in runs with a disk tier.
  virtual Status on_step_disk(const DiskStepMetrics& /*metrics*/) { return {}; }
  // (optional, since 9.8) In a data-parallel run, rank 0's sinks get each rank's share of a step,
  // rank by rank, just before on_step of the same step (after on_step_disk).
  virtual Status on_step_rank(const RankStepMetrics& /*metrics*/) { return {}; }
};

}  // namespace strata
