#pragma once
// A whole run as `strata train` and `strata eval` perform it. run_training is the recipe
// (training_run.cpp): the set-up, then a loop whose every line is one part of a step
// (core/training/training_session.hpp holds the parts).
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/distributed/communicator.hpp"
#include "core/manifest/manifest.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/residency/disk_tier.hpp"
#include "core/training/run_requirements.hpp"
#include "core/training/training_sample.hpp"
#include "strata/telemetry_sink.hpp"

namespace strata {

struct Stack;

// Builds a run's backend from its manifest. Empty: backend_for, the manifest's [device]. Tests
// pass one to run on a backend no manifest names (tests/sealed_backend.hpp).
using BackendFactory = std::function<std::unique_ptr<Backend>(const Manifest&)>;

struct TrainOptions {
  std::optional<std::filesystem::path> resume;  // a checkpoint dir, or checkpoint.dir's latest
  bool print_table = false;
  bool profile = false;
  // Stop after this step of the schedule (a checkpoint is written there when [checkpoint] dir is
  // set), so a long run can be done in resumable pieces; 0: run to train.steps.
  std::int64_t stop_after_step = 0;
  // Resume even when the checkpoint was saved by a run with another seed, stack or training data.
  bool force_resume = false;
  // Start again in a checkpoint directory that holds an earlier run's saves, moving them into
  // <dir>/earlier-run-<time>/ (without this, such a run is refused).
  bool fresh = false;
  // Replace an existing telemetry file that Strata's sinks did not write (core/training/run_outputs.hpp).
  bool overwrite_telemetry = false;
  // Write the memory timeline (core/training/memory_timeline.hpp) of the third step this run takes,
  // or its last when it takes fewer: the step `strata plan`'s dry run predicts.
  std::optional<std::filesystem::path> memory_timeline;
  BackendFactory backend;
  // The ranks mpirun started (core/distributed/communicator.hpp); null or one rank: this process alone.
  Communicator* communicator = nullptr;
  // Train one rank through the data-parallel path (its sums, gathers and shards, each a copy of
  // its own rows): how a machine with one GPU runs NCCL's calls (tests/test_cuda_data_parallel.cpp).
  bool data_parallel_with_one_rank = false;
};

struct TrainResult {
  RunSummary summary;
  std::vector<double> losses;  // per step, from the first step run
  std::optional<std::filesystem::path> last_checkpoint;
  // SIGINT or SIGTERM stopped the run after a whole step (checkpointed when [checkpoint] dir is
  // set); 0 when it ran to its last step. The CLI exits 128 + this.
  int stopped_by_signal = 0;
  // Not empty when a resume found the run already at its last step: why nothing was trained.
  std::string nothing_to_train;
  std::vector<TrainingSample> samples;  // train.sample_every's, in step order
  std::optional<DiskTierStats> disk;    // the disk tier's totals, when a strategy used it
};

// Exceptions: ManifestError / DataError / CheckpointError (invalid input), MemoryLimitExceeded and
// std::runtime_error (the run failed).
TrainResult run_training(const Manifest& manifest, PluginRegistry& registry, const TrainOptions& options);

// Mean cross-entropy of a checkpoint over consecutive windows of seq_len+1 tokens: of `data` when
// given (the whole file), else of the manifest's validation split.
double run_eval(const Manifest& manifest, PluginRegistry& registry, const std::filesystem::path& checkpoint,
                const std::optional<std::filesystem::path>& data, const BackendFactory& backend = {});

}  // namespace strata
