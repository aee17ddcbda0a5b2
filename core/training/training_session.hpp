#pragma once
// One run of `strata train`, in the pieces its recipe calls (core/training/training_run.cpp reads
// them top to bottom): the set-up (ranks, device, stack, data, outputs, the placed model, a resume)
// in the constructor, then per step taking the batch, the step, its evaluation, its report,
// sampling and saving, each one call; then the run's summary.
//
// The set-up lives in training_session.cpp, a step and its report in training_session_step.cpp,
// sampling, saving, stopping and the summary in training_session_end.cpp. The members are declared
// in the order the set-up builds them, so they are destroyed in reverse: the model before the
// backend and the stack whose kernels it calls.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_directory.hpp"
#include "core/data/dataset.hpp"
#include "core/device/backend.hpp"
#include "core/distributed/communicator.hpp"
#include "core/executor/executor.hpp"
#include "core/manifest/manifest.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/plugin/stack.hpp"
#include "core/residency/disk_tier.hpp"
#include "core/training/divergence_guard.hpp"
#include "core/training/memory_timeline.hpp"
#include "core/training/placed_model.hpp"
#include "core/training/run_outputs.hpp"
#include "core/training/stop_signal.hpp"
#include "core/training/training_run.hpp"
#include "core/training/training_sample.hpp"
#include "strata/telemetry_sink.hpp"

namespace strata {

// One step as the loop reports it: the executor's outcome and what the step measured around it.
struct StepRecord {
  std::int64_t step = 0;
  StepOutcome outcome;
  StepMetrics metrics;            // for the sinks; val_loss set by evaluate_if_due
  ArenaStats device_memory;       // the arena's, as the step left it
  DiskTierStats disk_before;      // the tier's totals as the step began
  double communication_ms = 0.0;  // data parallel: the step's calls to the other ranks
  double hidden_ms = 0.0;         // the part of them that overlapped computing
  std::uint64_t bytes_sent = 0;
};

class TrainingSession {
 public:
  // The whole set-up; a resume is loaded here. Throws as run_training does.
  TrainingSession(const Manifest& manifest, PluginRegistry& registry, const TrainOptions& options);
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // A resume that found the run at its last step: why nothing trains (nothing is written then).
  const std::string& nothing_to_train() const { return nothing_to_train_; }
  std::int64_t first_step() const { return start_step_ + 1; }
  std::int64_t last_step() const { return last_step_; }

  void begin();                                // the ranks agree on the weights; the sinks hear the run start
  void take_batch(std::int64_t step);          // this rank's micro-batches of the step
  StepRecord step(std::int64_t step);          // the step, timed, with its memory, transfers and messages
  void evaluate_if_due(StepRecord& record);    // the validation loss on eval_every's steps and the last
  void report(const StepRecord& record);       // to the sinks and the run's result; stops a diverged run
  void sample_if_due(std::int64_t step);       // a greedy sample on sample_every's steps
  bool stop_requested();                       // a signal arrived (on any rank): stop after this step
  void log_stop(std::int64_t step) const;      // says which signal stopped the run, and its last save
  void save_if_due(const StepRecord& record);  // on checkpoint.every's steps, the last, and a stop's
  TrainResult finish();                        // the summary to the sinks; what the run returns

 private:
  void resume(const std::filesystem::path& checkpoint);
  StepMetrics metrics_of(const StepRecord& record, const TransferTotals& transfers_before, double copy_seconds_before);
  void save(const StepRecord& record);

  const Manifest& global_manifest_;  // the whole run's; manifest_ is this rank's share of it
  const TrainOptions& options_;
  LocalCommunicator alone_;
  Communicator& communicator_;
  int ranks_ = 1;
  int rank_ = 0;
  bool root_ = true;
  bool data_parallel_ = false;
  Manifest manifest_;
  std::unique_ptr<Backend> device_;
  std::optional<HostServicesImpl> host_;
  Stack stack_;
  std::unique_ptr<Communicator> device_communicator_;
  Communicator* rows_communicator_ = nullptr;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<Dataset> dataset_;
  std::optional<TrainingSampler> sampler_;
  std::string data_identity_;  // what a save records of the data, and a resume compares
  std::optional<std::filesystem::path> memory_timeline_;
  std::optional<RunOutputs> outputs_;
  std::optional<CheckpointDirectoryLock> checkpoint_lock_;
  bool earlier_run_ = false;
  PlacedModel placed_;
  Model* model_ = nullptr;
  DataParallel* parallel_ = nullptr;
  Executor* executor_ = nullptr;
  DiskTier* disk_tier_ = nullptr;
  std::int64_t start_step_ = 0;
  std::int64_t last_step_ = 0;
  std::string nothing_to_train_;

  // The loop's, from begin().
  std::int64_t tokens_per_step_ = 0;
  std::vector<std::int32_t> inputs_;
  std::vector<std::int32_t> targets_;
  std::size_t micro_size_ = 0;
  std::vector<MicroBatch> micro_batches_;
  TrainResult result_;
  std::vector<double> step_ms_;
  std::vector<double> communication_ms_;
  std::vector<double> hidden_ms_;
  std::optional<DivergenceGuard> divergence_;
  std::optional<StopSignal> stop_signal_;  // from begin(): SIGINT/SIGTERM finish the step in hand
  std::chrono::steady_clock::time_point run_start_;
  std::optional<MemoryTimelineRecorder> timeline_;
  std::int64_t timeline_step_ = 0;
};

}  // namespace strata
