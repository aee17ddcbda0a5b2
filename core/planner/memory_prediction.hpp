#pragma once
// `strata plan`'s prediction (docs/architecture.md, "The planner"): the peak bytes of each home —
// device, host, disk — per category, and where in the step each peak falls, found by running the
// manifest's first steps and an evaluation pass on the dry backend (core/planner/dry_backend.hpp)
// with the manifest's own plugins. Nothing is computed, read from the data, or written.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/manifest/manifest.hpp"
#include "core/planner/calibration.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/training/memory_timeline.hpp"
#include "strata/memory_category.hpp"

namespace strata {

struct HomePrediction {
  CategoryBytes peak{};             // each category's own peak
  std::uint64_t peak_total = 0;     // the peak of the sum
  CategoryBytes at_peak{};          // what the sum's peak held
  std::string instant;              // "step 1, backward: before op 212 of 307 (matmul_backward)"
  std::uint64_t peak_reserved = 0;  // the most the arena holds from the system: live and cached blocks
};

struct MemoryPrediction {
  HomePrediction device;
  HomePrediction host;
  std::optional<HomePrediction> disk;  // when a strategy puts rows on disk (no instant)
  std::int64_t steps = 0;              // steps the dry run took, before its evaluation pass
  // The prediction exceeds [device] memory_limit: the refusal the run would meet, and the peak
  // comes from a dry run without the limit.
  std::optional<std::string> over_limit;
  // The run's resident memory (RSS), estimated: what this process held as the prediction started
  // (the binary, its libraries, the plugins), and the arenas' reserved peaks in host memory (the
  // device's too on the CPU backend). The data as the run holds it, and a library's own buffers as
  // they fill (OpenBLAS's), are not in it.
  std::uint64_t process_bytes = 0;
  bool device_in_host_memory = true;  // the CPU backend's device arena is host memory too
  std::uint64_t resident_bytes() const noexcept {
    return process_bytes + host.peak_reserved + (device_in_host_memory ? device.peak_reserved : 0);
  }
  std::string backend;   // what the prediction is for: "cpu", or the note for a CUDA manifest
  double seconds = 0.0;  // how long the dry run took
  // The step time, priced from a calibration (core/planner/calibration.hpp): the last dry step's
  // ops at the calibrated rates, its copies, the host's own time in it, and its disk transfers,
  // which overlap the rest. Empty without a calibration.
  struct StepTime {
    double ops_ms = 0.0;
    double copies_ms = 0.0;
    double host_ms = 0.0;
    double disk_ms = 0.0;  // 0 without a disk tier, or a calibration without the disk
    double total_ms = 0.0;
    std::map<std::string, double> by_op_ms;  // the ops' part, per op name
  };
  std::optional<StepTime> step;
};

// Exceptions: ManifestError (invalid input), as `strata train` would throw it. With a calibration,
// the step time is predicted too; a plugin's own kernels are timed on the spot, once per shape in
// `timings` when given (a search plans many stacks). `timeline`, when given, receives the memory
// timeline of the last dry step: the step `strata train --memory-timeline` records.
// `rank`: one rank of a data-parallel run (`strata plan --ranks`), its share of the batch and of
// the rows by [distributed] zero.
struct PlannedRank {
  int rank = 0;
  int ranks = 1;
};
MemoryPrediction predict_memory(const Manifest& manifest, PluginRegistry& registry,
                                const Calibration* calibration = nullptr, KernelTimings* timings = nullptr,
                                MemoryTimeline* timeline = nullptr, std::optional<PlannedRank> rank = std::nullopt);

}  // namespace strata
