#include "core/planner/memory_prediction.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/device/memory_limit_exceeded.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/model/ops_attention_kernel.hpp"
#include "core/planner/dry_backend.hpp"
#include "core/planner/dry_plugins.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "core/training/memory_timeline.hpp"
#include "core/training/placed_model.hpp"
#include "core/training/training_run.hpp"
#include "core/util/process_memory.hpp"

namespace strata {

namespace {

// "step 1, backward: before op 212 of 307 (matmul_backward)".
std::string describe(const DryBackend& device, const PeakInstant& peak) {
  const std::vector<LoggedOp>& log = device.op_log();
  const std::size_t first = device.phase_start(peak.phase_index);
  const std::size_t end =
      peak.phase_index + 1 < device.phases().size() ? device.phase_start(peak.phase_index + 1) : log.size();
  const std::string& phase = device.phases()[peak.phase_index];
  if (peak.phase_index == 0) return "placing the model, before the first step";
  // The pass is the latest op's that names one: recomputation inside backward stays "backward",
  // and under the fused update the passes alternate block by block.
  const char* pass = "forward";
  for (std::size_t i = first; i < peak.op_index && i < end; ++i) {
    const std::string_view op = log[i].name;
    if (op.find("backward") != std::string_view::npos) pass = "backward";
    if (op == "sum_of_squares" || op == "all_finite" || op == "adamw_update" || op == "sgd_update") pass = "update";
  }
  std::string text = phase + (phase == "evaluation" ? "" : ", " + std::string(pass));
  if (peak.op_index >= end) return text + ": after its last op";
  return text + ": before op " + std::to_string(peak.op_index - first + 1) + " of " + std::to_string(end - first) +
         " (" + log[peak.op_index].name + ")";
}

HomePrediction home(const DryBackend& device, const Allocator& arena, const PeakInstant& peak) {
  const ArenaStats stats = arena.stats();
  return {stats.peak, stats.peak_total, peak.live, describe(device, peak), stats.peak_reserved};
}

// The last dry step priced with the calibration.
MemoryPrediction::StepTime price_step(const DryBackend& device, std::size_t phase, const Calibration& calibration,
                                      const DiskTierStats& disk_before, const DiskTierStats& disk_after) {
  MemoryPrediction::StepTime time;
  const std::vector<LoggedOp>& log = device.op_log();
  for (std::size_t i = device.phase_start(phase); i < device.phase_start(phase + 1); ++i) {
    const double ms =
        1000.0 *
        (log[i].seconds >= 0.0
             ? log[i].seconds
             : calibration.seconds(std::string_view(log[i].name) == "copy_stream" ? "copy" : log[i].name, log[i].work));
    (std::string_view(log[i].name) == "copy_stream" ? time.copies_ms : time.ops_ms) += ms;
    time.by_op_ms[log[i].name] += ms;
  }
  time.host_ms = 1000.0 * device.phase_seconds(phase);
  if (calibration.disk_read_bytes_per_second > 0.0 && calibration.disk_write_bytes_per_second > 0.0)
    time.disk_ms = 1000.0 * (static_cast<double>(disk_after.bytes_read - disk_before.bytes_read) /
                                 calibration.disk_read_bytes_per_second +
                             static_cast<double>(disk_after.bytes_written - disk_before.bytes_written) /
                                 calibration.disk_write_bytes_per_second);
  // The disk tier's thread reads ahead and writes behind while the step computes: it shows only
  // where it takes longer than the rest. On the CPU the copy stream shares the cores: it adds.
  time.total_ms = std::max(time.ops_ms + time.copies_ms + time.host_ms, time.disk_ms);
  return time;
}

// `timings`: where a plugin's kernels are timed on the spot (null: not priced).
MemoryPrediction dry_run(const Manifest& manifest, PluginRegistry& registry, std::uint64_t device_limit,
                         const Calibration* calibration, KernelTimings* timings, MemoryTimeline* timeline,
                         Communicator* communicator) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t process_bytes = resident_bytes();  // before the dry run's own bookkeeping
  DryBackend device(device_limit, manifest.device.kind.starts_with("cuda"));
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  host.set_planning(true);
  host.set_disk_tier(manifest.device.disk_path.has_value());
  Stack stack = build_stack(manifest, registry, host, "");
  if (std::vector<std::string> problems = fused_update_problems(manifest, stack); !problems.empty())
    throw ManifestError(problems);
  if (communicator != nullptr) {
    Manifest whole = manifest;  // the batch of every rank
    whole.train.batch *= communicator->size();
    if (std::vector<std::string> problems = data_parallel_problems(whole, stack, communicator->size());
        !problems.empty())
      throw ManifestError(problems);
  }
  host.use_backend(device);
  // A plugin's kernels are timed on the spot when the step is priced; the backend's own attention
  // (its ops, which compute nothing here) is priced by the calibration.
  Kernel& kernel = stack.attention_on(device, manifest.model.attention_shape(1));
  DryKernel attention(kernel, device, dynamic_cast<OpsAttentionKernel*>(&kernel) == nullptr ? timings : nullptr,
                      "attention " + stack.attention_name);
  StorageTypes storage = stack.storage_on(device);
  std::optional<DryQuantizer> quantizer;
  if (storage.quantizer != nullptr) {
    std::ostringstream precision;  // the plugin and its keys: what its kernels' speed depends on
    if (manifest.precision.table != nullptr) precision << *manifest.precision.table;
    storage.quantizer = &quantizer.emplace(*storage.quantizer, device, timings, "precision " + precision.str());
  }
  std::vector<std::unique_ptr<DryCodec>> codecs;  // the strategies' codecs, sizing their codes, computing nothing
  for (StrategyCodec& codec : storage.codecs)
    codec.codec = codecs.emplace_back(std::make_unique<DryCodec>(*codec.codec, device)).get();
  const PlacedModel placed = place_model(manifest, device, stack, attention, storage, true, communicator);
  // Initialised as a run does, values aside: writing a frozen quantized matrix, for one, takes a
  // workspace. (A run's [train] init_from reads its values over these; the plan reads no files.)
  placed.model->init_weights_as_zeros(manifest.train.seed);

  // Tokens of zeros, shaped as `strata train` shapes its batches.
  const TrainSpec& train = manifest.train;
  const int rows = train.micro_batch_rows();
  const std::size_t micro_size = static_cast<std::size_t>(rows) * static_cast<std::size_t>(manifest.model.seq_len());
  const std::vector<std::int32_t> tokens(micro_size, 0);
  const std::vector<MicroBatch> micro_batches(static_cast<std::size_t>(train.micro_batches),
                                              MicroBatch{std::span<const std::int32_t>(tokens), tokens});
  // Three steps reach the steady state: the first allocates what is lazily made, the second is the
  // first with optimizer state and prefetches in flight, the third repeats it.
  MemoryPrediction prediction;
  prediction.steps = std::min<std::int64_t>(train.steps, 3);
  DiskTierStats disk_before;
  std::optional<MemoryTimelineRecorder> recorder;
  if (timeline != nullptr) recorder.emplace(device.device_memory(), device.host_memory(), *placed.executor);
  for (std::int64_t step = 1; step <= prediction.steps; ++step) {
    if (placed.disk_tier) disk_before = placed.disk_tier->stats();
    device.begin_phase("step " + std::to_string(step));
    if (recorder && step == prediction.steps) recorder->begin(step);  // the step a run's timeline records
    (void)placed.executor->train_step(step, micro_batches);
  }
  if (recorder) {
    *timeline = recorder->end();
    recorder.reset();
  }
  const std::size_t last_step = device.phases().size() - 1;
  device.begin_phase("evaluation");
  if (calibration != nullptr)
    prediction.step = price_step(device, last_step, *calibration, disk_before,
                                 placed.disk_tier ? placed.disk_tier->stats() : DiskTierStats{});
  (void)placed.executor->forward_loss_sum(micro_batches.front(), rows);

  prediction.device = home(device, device.device_memory(), device.device_peak());
  prediction.host = home(device, device.host_memory(), device.host_peak());
  if (placed.disk_tier) {
    const DiskTierStats disk = placed.disk_tier->stats();
    prediction.disk = HomePrediction{disk.peak, disk.peak_total, {}, {}};
  }
  prediction.process_bytes = process_bytes;
  prediction.device_in_host_memory = manifest.device.kind == "cpu";
  prediction.backend = manifest.device.kind == "cpu"
                           ? "cpu"
                           : "cpu (for " + manifest.device.kind +
                                 ": the same rows, with the CPU's attention and kernels; the CUDA context, cuBLAS "
                                 "workspace and staging are not included)";
  prediction.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return prediction;
}

}  // namespace

MemoryPrediction predict_memory(const Manifest& manifest, PluginRegistry& registry, const Calibration* calibration,
                                KernelTimings* timings, MemoryTimeline* timeline, std::optional<PlannedRank> rank) {
  KernelTimings own;
  if (calibration != nullptr && timings == nullptr) timings = &own;
  if (calibration == nullptr) timings = nullptr;
  std::optional<PlanningCommunicator> communicator;
  if (rank && rank->ranks > 1) {
    if (manifest.train.batch % (rank->ranks * manifest.train.micro_batches) != 0)
      throw ManifestError(manifest.path.string() + ": train.batch = " + std::to_string(manifest.train.batch) +
                          " is not divisible by " + std::to_string(rank->ranks) +
                          " ranks x train.micro_batches = " + std::to_string(manifest.train.micro_batches) +
                          ": each rank trains on an equal share of every batch");
    communicator.emplace(rank->rank, rank->ranks);
  }
  Manifest quiet = communicator ? rank_manifest(manifest, rank->rank, rank->ranks) : manifest;
  quiet.telemetry.clear();  // a plan writes nothing: no sinks
  Communicator* ranks = communicator ? &*communicator : nullptr;
  // Over the limit, the step stops: with MemoryLimitExceeded, or, when a plugin's hook allocated,
  // with that hook's failure naming it. Either way the peak comes from a run without the limit; a
  // failure that run repeats is not the limit's, and stands.
  std::string refusal;
  try {
    return dry_run(quiet, registry, manifest.device.memory_limit, calibration, timings, timeline, ranks);
  } catch (const ManifestError&) {
    throw;
  } catch (const std::exception& e) {
    if (manifest.device.memory_limit == 0) throw;
    refusal = e.what();
  }
  MemoryPrediction prediction = dry_run(quiet, registry, 0, calibration, timings, timeline, ranks);
  prediction.over_limit = refusal;
  return prediction;
}

}  // namespace strata
