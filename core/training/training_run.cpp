#include "core/training/training_run.hpp"

#include <cblas.h>
#include <omp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/checkpoint_directory.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/data/corpus_tokens.hpp"
#include "core/data/data_error.hpp"
#include "core/data/data_fingerprint.hpp"
#include "core/data/dataset.hpp"
#include "core/data/token_file.hpp"
#include "core/device/backends.hpp"
#include "core/device/disk_tier.hpp"
#include "core/distributed/data_parallel.hpp"
#include "core/distributed/device_communicator.hpp"
#include "core/executor/executor.hpp"
#include "core/executor/hook_failed.hpp"
#include "core/manifest/manifest_error.hpp"
#include "core/model/make_model.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_memory_impl.hpp"
#include "core/plugin/stack.hpp"
#include "core/training/divergence_guard.hpp"
#include "core/training/evaluation_model.hpp"
#include "core/training/memory_timeline.hpp"
#include "core/training/placed_model.hpp"
#include "core/training/run_outputs.hpp"
#include "core/training/stop_signal.hpp"
#include "core/util/format_bytes.hpp"
#include "core/util/median.hpp"
#include "core/util/random.hpp"

namespace strata {

std::unique_ptr<Backend> backend_for(const Manifest& manifest) {
  if (const std::string why = backend_unavailable_reason(manifest.device.kind); !why.empty())
    throw ManifestError(manifest.path.string() + ": [device] kind = \"" + manifest.device.kind + "\": " + why);
  return make_backend(manifest.device.kind, manifest.device.memory_limit, manifest.device.tf32);
}

namespace {

DataOptions data_options(const Manifest& manifest, const Tokenizer* tokenizer) {
  return {manifest.data.train,
          manifest.data.val,
          manifest.data.val_fraction,
          manifest.model.vocab(),
          manifest.model.seq_len(),
          manifest.train.micro_batch_rows(),
          tokenizer};
}

// The manifest's tokenizer ([data] tokenizer, or the [model] from directory's), checked against
// model.vocab; null without one.
std::unique_ptr<Tokenizer> tokenizer_for(const Manifest& manifest) {
  if (!manifest.data.tokenizer) return nullptr;
  auto tokenizer = load_tokenizer(*manifest.data.tokenizer);
  check_tokenizer_fits(*tokenizer, *manifest.data.tokenizer, manifest.model.vocab());
  spdlog::info("tokenizer: {} from {}, vocabulary {}", tokenizer->kind(), manifest.data.tokenizer->string(),
               tokenizer->vocab_size());
  return tokenizer;
}

// Mean cross-entropy over windows, `rows` windows per forward pass, the last pass padded.
double mean_window_loss(Executor& executor, std::int64_t windows, int rows, int seq_len,
                        const std::function<void(std::int64_t, std::int32_t*, std::int32_t*)>& window_at_index) {
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(rows) * seq_len);
  std::vector<std::int32_t> targets(inputs.size());
  double sum = 0.0;
  for (std::int64_t first = 0; first < windows; first += rows) {
    const int real_rows = static_cast<int>(std::min<std::int64_t>(rows, windows - first));
    for (int row = 0; row < rows; ++row) {
      const std::int64_t window = first + std::min(row, real_rows - 1);  // padding repeats the last window
      window_at_index(window, inputs.data() + static_cast<std::size_t>(row) * seq_len,
                      targets.data() + static_cast<std::size_t>(row) * seq_len);
    }
    sum += executor.forward_loss_sum({inputs, targets}, real_rows);
  }
  return sum / (static_cast<double>(windows) * seq_len);
}

// The validation loss as training reports it and `strata eval` reproduces it: the first
// eval_batches x micro-batch rows windows of the validation split (all when eval_batches = 0), in
// passes of `pass_rows` rows (a data-parallel rank's model holds fewer rows than the manifest's
// micro batch; 0: the micro batch's).
double validation_loss(Executor& executor, const Dataset& dataset, const Manifest& manifest, int pass_rows = 0) {
  const int rows = manifest.train.micro_batch_rows();
  const std::int64_t windows = manifest.train.eval_batches > 0
                                   ? std::min<std::int64_t>(dataset.val_windows(), manifest.train.eval_batches * rows)
                                   : dataset.val_windows();
  return mean_window_loss(executor, windows, pass_rows > 0 ? pass_rows : rows, manifest.model.seq_len(),
                          [&](std::int64_t w, std::int32_t* in, std::int32_t* out) { dataset.val_window(w, in, out); });
}

}  // namespace

void configure_threads(int threads) {
  const int count = threads > 0 ? threads : omp_get_num_procs();
  omp_set_num_threads(count);
  openblas_set_num_threads(count);
}

std::vector<std::string> disk_tier_problems(const Manifest& manifest, bool rows_on_disk, bool has_predictor) {
  std::vector<std::string> problems;
  const std::string where = manifest.path.string() + ": ";
  if (manifest.device.disk_path)
    if (const std::string problem = disk_directory_problem(*manifest.device.disk_path); !problem.empty())
      problems.push_back(where + "[device] disk_path = \"" + manifest.device.disk_path->string() + "\" " + problem);
  if (rows_on_disk && !manifest.device.disk_path)
    problems.push_back(where +
                       "a strategy puts rows on disk, but [device] disk_path is not set: name a directory for the "
                       "disk tier's files");
  if (rows_on_disk && has_predictor)
    problems.push_back(where +
                       "[predictor] moves the weights through their optimizer state, which a strategy puts on disk: "
                       "keep the state, masters and weights in memory (offload optimizer_state = \"host\", without "
                       "masters or weights = \"disk\") with a predictor");
  return problems;
}

std::vector<std::string> fused_update_problems(const Manifest& manifest, const Stack& stack) {
  std::vector<std::string> problems;
  if (manifest.train.update != UpdateMode::fused) return problems;
  const std::string where = manifest.path.string() + ": train.update = \"fused\": ";
  const std::string optimizer = "[optimizer] plugin = \"" + manifest.optimizer.plugin + "\"";
  // SDK 9.4's clips_by_given_norm() also says the optimizer takes begin_step once per block (9.3's
  // steps in parts promise one begin_step over every gradient).
  if (!stack.optimizer->steps_in_parts() || !stack.optimizer->clips_by_given_norm())
    problems.push_back(where + optimizer +
                       " does not take the fused update's per-block steps (SDK 9.4: steps_in_parts and "
                       "begin_step_with_norm)");
  if (stack.predictor)
    problems.push_back(where + "[predictor] steps update the weights without gradients: use update = \"full\"");
  if (stack.precision->loss_scale() != 1.0)
    problems.push_back(where + "[precision] plugin = \"" + manifest.precision.plugin +
                       "\" scales the loss and skips every step whose scaled gradients overflow, and a fused step "
                       "cannot be skipped once blocks above are updated: use bf16, or update = \"full\"");
  return problems;
}

Manifest rank_manifest(const Manifest& manifest, int rank, int ranks) {
  Manifest mine = manifest;
  mine.train.batch = manifest.train.batch / ranks;
  if (rank != 0) mine.telemetry.clear();
  return mine;
}

std::vector<std::string> data_parallel_problems(const Manifest& manifest, const Stack& stack, int ranks) {
  std::vector<std::string> problems;
  const std::string where = manifest.path.string() + ": ";
  const int zero = manifest.distributed.zero;
  const TrainSpec& train = manifest.train;
  if (train.batch % (ranks * train.micro_batches) != 0)
    problems.push_back(where + "train.batch = " + std::to_string(train.batch) + " is not divisible by " +
                       std::to_string(ranks) + " ranks x train.micro_batches = " + std::to_string(train.micro_batches) +
                       ": each rank trains on an equal share of every batch");
  if (const std::string why = device_communication_unavailable(manifest.device.kind); !why.empty())
    problems.push_back(where + "[device] kind = \"" + manifest.device.kind + "\": " + why);
  if (stack.predictor)
    problems.push_back(where + "[predictor] steps without gradients, which data parallel does not share: run one rank");
  if (zero >= 1 && (!stack.optimizer->steps_in_parts() || !stack.optimizer->clips_by_given_norm()))
    problems.push_back(where + "[distributed] zero = " + std::to_string(zero) + ": [optimizer] plugin = \"" +
                       manifest.optimizer.plugin +
                       "\" does not update a subset of the parameters by a given norm (SDK 9.4: steps_in_parts and "
                       "begin_step_with_norm): use zero = 0");
  if (zero >= 1 && train.update == UpdateMode::fused)
    problems.push_back(where + "[distributed] zero = " + std::to_string(zero) +
                       " with train.update = \"fused\": use zero = 0 (the fused update already frees each block's "
                       "gradients)");
  if (zero >= 3 && train.sample_every > 0)
    problems.push_back(where +
                       "train.sample_every with [distributed] zero = 3: a sample needs every weight on rank 0, "
                       "which keeps only its share (sample from a save with `strata generate`)");
  if (zero >= 2 && stack.precision->loss_scale() != 1.0)
    problems.push_back(where + "[distributed] zero = " + std::to_string(zero) + " with [precision] plugin = \"" +
                       manifest.precision.plugin +
                       "\", whose loss scale follows every gradient: use bf16, or zero = 1");
  return problems;
}

// The filesystem `path` is on (that of its nearest existing ancestor), or none.
std::optional<dev_t> filesystem_of(std::filesystem::path path) {
  std::error_code error;
  path = std::filesystem::absolute(path, error);
  for (; !path.empty(); path = path.parent_path()) {
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0) return status.st_dev;
    if (path == path.parent_path()) break;
  }
  return std::nullopt;
}

std::unique_ptr<DiskTier> open_disk_tier(const Manifest& manifest, Backend& device, bool has_predictor,
                                         bool account_only) {
  if (std::vector<std::string> problems = disk_tier_problems(manifest, true, has_predictor); !problems.empty())
    throw ManifestError(problems);
  // Saves keep the tier's rows by hard link, which needs one filesystem for both.
  if (!account_only && manifest.checkpoint.dir) {
    const auto tier = filesystem_of(*manifest.device.disk_path), saves = filesystem_of(*manifest.checkpoint.dir);
    if (tier && saves && *tier != *saves)
      spdlog::warn(
          "[checkpoint] dir ({}) is on another filesystem than [device] disk_path ({}): saves will copy the "
          "disk tier's rows instead of keeping them by hard link",
          manifest.checkpoint.dir->string(), manifest.device.disk_path->string());
  }
  DiskTierOptions options;
  options.directory = *manifest.device.disk_path;
  options.limit = manifest.device.disk_limit;
  options.staging_arena = &device.host_memory();
  options.account_only = account_only;
  return std::make_unique<DiskTier>(std::move(options));
}

namespace {

// One number for a manifest as read (--set included) and the options that steer the run: ranks
// compare theirs before step 1.
std::uint64_t run_digest(const Manifest& manifest, const TrainOptions& options) {
  std::ostringstream text;
  text << *manifest.document << "\nresume " << (options.resume ? options.resume->string() : "-") << "\nstop after "
       << options.stop_after_step << "\nfresh " << options.fresh << "\nforce resume " << options.force_resume;
  return splitmix64(std::hash<std::string>{}(text.str()));
}

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

}  // namespace

TrainResult run_training(const Manifest& global_manifest, PluginRegistry& registry, const TrainOptions& options) {
  LocalCommunicator alone;
  Communicator& communicator = options.communicator != nullptr ? *options.communicator : alone;
  const int ranks = communicator.size(), rank = communicator.rank();
  const bool root = rank == 0;
  if (ranks > 1) {
    const double digest = static_cast<double>(run_digest(global_manifest, options) >> 11);  // exact in a double
    const std::vector<double> digests = all_gather_doubles(communicator, {&digest, 1});
    std::string differing;
    for (int r = 1; r < ranks; ++r)
      if (digests[static_cast<std::size_t>(r)] != digests[0]) differing += " " + std::to_string(r);
    if (!differing.empty())
      throw ManifestError(global_manifest.path.string() +
                          ": the manifest (with its --set values) or the options "
                          "(--resume, --stop-after, --fresh, --force-resume) of rank(s)" +
                          differing + " differ from rank 0's: every rank must train the same run");
  }
  const bool data_parallel = ranks > 1 || options.data_parallel_with_one_rank;
  Manifest manifest = data_parallel ? rank_manifest(global_manifest, rank, ranks) : global_manifest;
  if (data_parallel) manifest.device.kind = this_rank_device_kind(manifest.device.kind);  // a GPU each
  // threads = 0 under mpirun: this machine's cores shared among the ranks on it.
  const char* local_ranks = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  configure_threads(manifest.train.threads > 0 || ranks == 1 || local_ranks == nullptr
                        ? manifest.train.threads
                        : std::max(1, omp_get_num_procs() / std::max(1, std::atoi(local_ranks))));
  // The backend first: an unknown device is invalid input, refused before anything is written,
  // and the backend must outlive the plugin objects (their ops() points into it).
  std::unique_ptr<Backend> device = options.backend ? options.backend(manifest) : backend_for(manifest);
  HostServicesImpl host(manifest.model.info(), manifest.device.kind);
  host.set_disk_tier(manifest.device.disk_path.has_value());
  Stack stack = build_stack(manifest, registry, host, root ? "console" : "");  // rank 0 alone reports
  if (std::vector<std::string> problems = fused_update_problems(manifest, stack); !problems.empty())
    throw ManifestError(problems);
  if (data_parallel)
    if (std::vector<std::string> problems = data_parallel_problems(global_manifest, stack, ranks); !problems.empty())
      throw ManifestError(problems);
  if (global_manifest.distributed.present && !data_parallel)
    spdlog::info("[distributed]: one rank (start with mpirun -np N for more)");
  // The rows go through NCCL between GPUs; the rest (and host rows) through `communicator`.
  const std::unique_ptr<Communicator> device_communicator =
      data_parallel ? communicator_for_device(communicator, *device) : nullptr;
  Communicator* const rows_communicator = !data_parallel        ? nullptr
                                          : device_communicator ? device_communicator.get()
                                                                : &communicator;
  if (data_parallel)
    spdlog::info("data parallel: rank {} of {} through {}, zero = {}, {} of the batch's {} rows", rank, ranks,
                 rows_communicator->name(), manifest.distributed.zero, manifest.train.batch,
                 global_manifest.train.batch);
  const TrainSpec& train = manifest.train;
  const int rows = manifest.train.micro_batch_rows();
  const auto tokenizer = tokenizer_for(manifest);
  const Dataset dataset(data_options(manifest, tokenizer.get()));
  std::optional<TrainingSampler> sampler;  // its prompt checked before anything is written
  if (train.sample_every > 0) sampler.emplace(manifest, tokenizer.get(), dataset);
  // What a save records of the data, and a resume compares: its content, not only its path, and
  // the tokenizer that turned text into tokens.
  std::string data_identity =
      manifest.checkpoint.dir || options.resume ? data_fingerprint(manifest.data.train) : std::string();
  if (!data_identity.empty() && tokenizer) data_identity += ",tokenizer:" + std::to_string(tokenizer->fingerprint());
  // The checkpoint directory: writable (checked now, not at the first save), this run's alone, and
  // cleared of partial saves a killed run left.
  const std::optional<std::filesystem::path> memory_timeline = root ? options.memory_timeline : std::nullopt;
  RunOutputs outputs(manifest, options.resume, options.overwrite_telemetry,
                     memory_timeline);  // checked now, locked below
  std::optional<CheckpointDirectoryLock> checkpoint_lock;
  if (manifest.checkpoint.dir && root) {  // rank 0 alone writes the saves
    check_checkpoint_directory(*manifest.checkpoint.dir);
    checkpoint_lock.emplace(*manifest.checkpoint.dir);
    if (const int removed = remove_stale_partial_saves(*manifest.checkpoint.dir); removed > 0)
      spdlog::info("removed {} partial save(s) a stopped run left in {}", removed, manifest.checkpoint.dir->string());
  }
  // A run that does not continue the saves in its directory would number its own from step 1 over
  // them, and prune them with keep_last: it is refused, or with --fresh moves them aside (below).
  const bool earlier_run =
      manifest.checkpoint.dir && root && check_earlier_run(*manifest.checkpoint.dir, options.resume, options.fresh);

  host.use_backend(*device);
  // A large model takes a while to place and initialise: say what is happening, and how long it took.
  const auto setup_start = std::chrono::steady_clock::now();
  const auto seconds_since = [](std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  spdlog::info("placing {:.2f}M parameters on {}", static_cast<double>(manifest.model.parameter_count()) / 1e6,
               device->name());
  const PlacedModel placed =
      place_model(manifest, *device, stack, stack.attention_on(*device, manifest.model.attention_shape(1)),
                  stack.storage_on(*device), false, rows_communicator);
  Model& model = *placed.model;
  DataParallel* parallel = placed.data_parallel.get();
  Executor& executor = *placed.executor;
  executor.observe_host_updates([&host](bool on_host) { host.set_update_on_host(on_host); });
  DiskTier* disk_tier = placed.disk_tier.get();
  PluginMemoryImpl& controller_memory = *placed.controller_memory;
  spdlog::info("allocated in {:.1f} s: {} on the device, {} on the host; initialising the weights (seed {})",
               seconds_since(setup_start), format_bytes(device->device_memory().live_total()),
               format_bytes(device->host_memory().live_total()), train.seed);
  const auto init_start = std::chrono::steady_clock::now();
  // An initialisation, and a resume, write this rank's own rows alone (Model::write_values,
  // load_checkpoint): another rank's are drawn or read, and dropped.
  model.init_weights(train.seed);
  spdlog::info("weights initialised in {:.1f} s", seconds_since(init_start));
  // A resume loads its trained weights over these; a frozen base stays as loaded here.
  if (const auto base = manifest.starting_weights();
      base && (!options.resume || !stack.trainable.trains_everything())) {
    load_weights(*base, model);
    spdlog::info("weights from {}", base->string());
  }
  if (options.print_table && root) model.table().print(std::cout);

  std::int64_t start_step = 0;
  if (options.resume) {
    const TrainerState state =
        load_checkpoint(*options.resume, model, manifest.optimizer.plugin, stack.optimizer.get());
    // The checkpoint must come from this run: the same seed (data order), stack and data.
    std::string differences;
    if (state.seed != train.seed)
      differences += "\n  seed: saved " + std::to_string(state.seed) + ", manifest " + std::to_string(train.seed);
    if (!state.stack.empty() && state.stack != stack.description)
      differences += "\n  stack: saved '" + state.stack + "', manifest '" + stack.description + "'";
    if (!state.data.empty() && state.data != manifest.data.train.string())
      differences += "\n  data: saved '" + state.data + "', manifest '" + manifest.data.train.string() + "'";
    else if (!state.data_fingerprint.empty() && state.data_fingerprint != data_identity)
      differences += "\n  data: '" + manifest.data.train.string() + "' changed since the save (saved " +
                     state.data_fingerprint + ", now " + data_identity + ")";
    if (!differences.empty() && !options.force_resume)
      throw CheckpointError(options.resume->string() + ": saved by a different run:" + differences +
                            "\n(resume anyway with --force-resume)");
    if (!differences.empty()) spdlog::warn("resuming a different run (--force-resume):{}", differences);
    if (Status status = stack.precision->restore_state(state.precision); !status)
      throw CheckpointError(options.resume->string() + ": " + status.message());
    if (stack.predictor)
      if (Status status = stack.predictor->restore_state(state.predictor); !status)
        throw CheckpointError(options.resume->string() + ": " + status.message());
    for (std::size_t i = 0; i < stack.strategies.size(); ++i) {
      const auto saved = state.strategies.find(strategy_state_key(i, manifest.strategies[i].plugin));
      const std::string_view strategy_state = saved == state.strategies.end() ? "" : std::string_view(saved->second);
      if (Status status = stack.strategies[i]->restore_state(strategy_state); !status)
        throw CheckpointError(options.resume->string() + ": " + status.message());
    }
    executor.restore_fused_clip_norm(state.fused_clip_norm);
    start_step = state.step;
    spdlog::info("resumed from {} at step {}", resolve_checkpoint(*options.resume).string(), start_step);
    // Nothing to train is said plainly, and nothing is written (no telemetry, no save, no prune).
    const std::int64_t target = options.stop_after_step > 0 ? options.stop_after_step : train.steps;
    if (start_step >= target) {
      TrainResult finished;
      finished.nothing_to_train = "the checkpoint is at step " + std::to_string(start_step) +
                                  ", and this run stops at " +
                                  (options.stop_after_step > 0 ? "--stop-after " : "train.steps = ") +
                                  std::to_string(target) + ": there is nothing to train (raise " +
                                  (options.stop_after_step > 0 ? "--stop-after" : "train.steps") + " to go on)";
      return finished;
    }
  }

  if (parallel) {
    // The owners' initialised (or loaded) weights to every rank: at zero 1 and 2 a rank rounds only
    // the masters it keeps. Also the point every rank reaches before rank 0 moves saves aside.
    parallel->share_updated_parameters();
    (void)parallel->largest(0);
  }
  if (options.fresh && earlier_run)  // after init_from and --resume have read what they need
    spdlog::info("--fresh: moved the earlier run's saves to {}", move_saves_aside(*manifest.checkpoint.dir).string());

  const std::int64_t tokens_per_step =
      static_cast<std::int64_t>(global_manifest.train.batch) * manifest.model.seq_len();
  RunInfo info{manifest.path.string(),           stack.description,           train.steps, start_step, tokens_per_step,
               manifest.model.parameter_count(), manifest.device.memory_limit};
  outputs.lock();
  for (const auto& sink : stack.telemetry)
    if (Status status = sink->on_run_start(info); !status) throw HookFailed(status.message());

  std::vector<std::int32_t> inputs(static_cast<std::size_t>(train.micro_batches) * rows * manifest.model.seq_len());
  std::vector<std::int32_t> targets(inputs.size());
  const std::size_t micro_size = inputs.size() / static_cast<std::size_t>(train.micro_batches);
  std::vector<MicroBatch> micro_batches;
  for (int m = 0; m < train.micro_batches; ++m)
    micro_batches.push_back({std::span<const std::int32_t>(inputs).subspan(m * micro_size, micro_size),
                             std::span<const std::int32_t>(targets).subspan(m * micro_size, micro_size)});

  TrainResult result;
  std::vector<double> step_ms;
  std::vector<double> communication_ms;  // data parallel: per step, in calls to the other ranks
  std::vector<double> hidden_ms;         // and the part of it that overlapped computing
  DivergenceGuard divergence({.factor = train.divergence_factor, .steps = train.divergence_steps});
  const StopSignal stop_signal;  // SIGINT/SIGTERM finish the step in hand, then stop
  Allocator& device_memory = device->device_memory();
  const auto run_start = std::chrono::steady_clock::now();
  model.profiler().reset();
  if (options.profile && device->name() != "cpu") model.profiler().set_fence([&device] { device->wait_for_compute(); });
  const std::int64_t last_step =
      options.stop_after_step > 0 ? std::min(options.stop_after_step, train.steps) : train.steps;
  std::optional<MemoryTimelineRecorder> timeline;
  const std::int64_t timeline_step = std::min(start_step + 3, last_step);
  if (memory_timeline) timeline.emplace(device_memory, device->host_memory(), executor);
  for (std::int64_t step = start_step + 1; step <= last_step; ++step) {
    for (int m = 0; m < train.micro_batches; ++m)  // this rank's micro batches of the step's ranks x micro_batches
      dataset.train_batch(train.seed, step, rank * train.micro_batches + m, inputs.data() + m * micro_size,
                          targets.data() + m * micro_size);
    device_memory.reset_window();
    const TransferTotals transfers_before = model.store().transfers();
    const double copy_seconds_before = device->copy_stream().busy_seconds();
    const DiskTierStats disk_before = disk_tier ? disk_tier->stats() : DiskTierStats{};
    const auto step_start = std::chrono::steady_clock::now();
    const double communicated_before = parallel ? parallel->communicator().seconds() : 0.0;
    const double waited_before = parallel ? parallel->communicator().waited_seconds() : 0.0;
    const std::uint64_t sent_before = parallel ? parallel->communicator().bytes_sent() : 0;
    if (timeline && step == timeline_step) timeline->begin(step);
    const StepOutcome outcome = executor.train_step(step, micro_batches);
    device->synchronize();  // the step's time is the device's too, and an op's failure surfaces here
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start).count();
    if (timeline && step == timeline_step) {  // written outside the step's time
      try {
        write_timeline(*memory_timeline, timeline->end());
      } catch (const std::exception& e) {  // the run goes on without it
        spdlog::warn("the memory timeline was not written: {}", e.what());
      }
      timeline.reset();
    }
    const ArenaStats stats = device_memory.stats();
    if (parallel) {
      // The step's calls to the other ranks, and the part the caller did not wait for: it computed.
      const double communicated = parallel->communicator().seconds() - communicated_before;
      const double waited = parallel->communicator().waited_seconds() - waited_before;
      communication_ms.push_back(1000.0 * communicated);
      hidden_ms.push_back(1000.0 * std::max(0.0, communicated - waited));
    }
    const std::uint64_t sent_in_step = parallel ? parallel->communicator().bytes_sent() - sent_before : 0;

    StepMetrics metrics;
    metrics.step = step;
    metrics.total_steps = train.steps;
    metrics.phase = outcome.phase;
    metrics.loss = outcome.loss;
    metrics.lr = outcome.report.lr;
    metrics.grad_norm = outcome.report.grad_norm;
    metrics.skipped = outcome.skipped;
    metrics.loss_scale = outcome.loss_scale;
    metrics.backward = phase_needs_gradients(outcome.phase);
    metrics.rolled_back = outcome.rolled_back;
    metrics.predictor_ms = outcome.predictor_ms;
    result.summary.skipped_steps += outcome.skipped ? 1 : 0;
    result.summary.backward_passes += metrics.backward ? 1 : 0;
    result.summary.predict_steps += metrics.backward ? 0 : 1;
    result.summary.rollbacks += outcome.rolled_back ? 1 : 0;
    result.summary.predictor_ms += outcome.predictor_ms;
    metrics.ms = ms;
    metrics.tokens_per_s = static_cast<double>(tokens_per_step) / (ms / 1000.0);
    metrics.device_bytes = stats.live;
    metrics.peak_device_bytes = stats.window_peak_total;
    metrics.peak_device_bytes_by_category = stats.window_peak;
    metrics.host_bytes = device->host_memory().live_total();
    if (const auto driver = device->driver_memory()) {
      metrics.driver_device_bytes = driver->used;
      result.summary.peak_driver_device_bytes = std::max(result.summary.peak_driver_device_bytes, driver->used);
    }
    metrics.bytes_to_host = model.store().transfers().bytes_to_host - transfers_before.bytes_to_host;
    metrics.bytes_to_device = model.store().transfers().bytes_to_device - transfers_before.bytes_to_device;
    metrics.transfer_ms = 1000.0 * (device->copy_stream().busy_seconds() - copy_seconds_before);
    metrics.exposed_transfer_ms =
        1000.0 * (model.store().transfers().exposed_seconds - transfers_before.exposed_seconds);
    // Rank 0 reports; at zero 3 every rank takes part (the weights are gathered as the pass goes).
    const bool eval_now = (root || (parallel && parallel->zero() >= 3)) &&
                          (step == train.steps || (train.eval_every > 0 && step % train.eval_every == 0));
    if (eval_now) {
      metrics.val_loss = validation_loss(executor, dataset, global_manifest, manifest.train.micro_batch_rows());
      device->synchronize();  // an op's failure in the evaluation surfaces here, not as a NaN
    }

    result.losses.push_back(outcome.loss);
    step_ms.push_back(ms);
    if (result.losses.size() == 1) result.summary.first_loss = outcome.loss;
    result.summary.final_loss = outcome.loss;
    if (metrics.val_loss) result.summary.final_val_loss = metrics.val_loss;
    if (disk_tier) {
      const DiskTierStats disk = disk_tier->stats();
      const DiskStepMetrics disk_metrics{step,
                                         disk.bytes_read - disk_before.bytes_read,
                                         disk.bytes_written - disk_before.bytes_written,
                                         1000.0 * (disk.busy_seconds - disk_before.busy_seconds),
                                         1000.0 * (disk.waited_seconds - disk_before.waited_seconds),
                                         total_bytes(disk.live),
                                         disk.file_bytes};
      for (const auto& sink : stack.telemetry)
        if (Status status = sink->on_step_disk(disk_metrics); !status) throw HookFailed(status.message());
    }
    if (parallel) {
      const std::vector<RankStepMetrics> ranks_step =
          gather_rank_metrics(*parallel, step, communication_ms.back(), hidden_ms.back(), sent_in_step, stats);
      for (const RankStepMetrics& rank_step : ranks_step)
        for (const auto& sink : stack.telemetry)
          if (Status status = sink->on_step_rank(rank_step); !status) throw HookFailed(status.message());
    }
    for (const auto& sink : stack.telemetry)
      if (Status status = sink->on_step(metrics); !status) throw HookFailed(status.message());

    // The step's records are written before the run stops, so the log shows the blow-up.
    if (auto diverged = divergence.observe(step, outcome.loss)) throw std::runtime_error(*diverged);
    if (sampler && root && step % train.sample_every == 0) {
      model.store().complete_all_moves();
      device->synchronize();  // the weights are read as the step left them
      const auto sample_start = std::chrono::steady_clock::now();
      TrainingSample sample = sampler->sample(model, step);
      spdlog::info("step {}: greedy sample of {} tokens after {} of prompt ({:.2f} s):\n{}{}", step,
                   sample.tokens.size(), sample.prompt.size(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - sample_start).count(),
                   sample.prompt_text, sample.text);
      result.samples.push_back(std::move(sample));
    }
    // The ranks stop after the same step: the one after which any rank had a signal.
    result.stopped_by_signal = parallel ? parallel->largest(stop_signal.received()) : stop_signal.received();
    const bool checkpoint_now =
        manifest.checkpoint.dir && (step == last_step || result.stopped_by_signal != 0 ||
                                    (manifest.checkpoint.every > 0 && step % manifest.checkpoint.every == 0));
    if (checkpoint_now && !outcome.skipped && !outcome.rolled_back && !std::isfinite(outcome.loss))
      throw std::runtime_error("the loss is " + std::to_string(outcome.loss) + " at step " + std::to_string(step) +
                               ": no checkpoint is written from non-finite training, and the earlier saves are kept");
    if (checkpoint_now) {
      model.store().complete_all_moves();
      device->synchronize();  // a checkpoint is written only from ops that all succeeded
      std::string precision_state, predictor_state;
      if (Status status = stack.precision->state(precision_state); !status) throw HookFailed(status.message());
      if (stack.predictor)
        if (Status status = stack.predictor->state(predictor_state); !status) throw HookFailed(status.message());
      TrainerState saved{step,
                         train.seed,
                         manifest.optimizer.plugin,
                         stack.description,
                         manifest.data.train.string(),
                         std::move(precision_state),
                         std::move(predictor_state),
                         {},
                         data_identity,
                         outcome.loss,
                         executor.fused_clip_norm()};
      for (std::size_t i = 0; i < stack.strategies.size(); ++i) {
        std::string strategy_state;
        if (Status status = stack.strategies[i]->state(strategy_state); !status) throw HookFailed(status.message());
        if (!strategy_state.empty())
          saved.strategies[strategy_state_key(i, manifest.strategies[i].plugin)] = std::move(strategy_state);
      }
      // Rank 0 writes the one-process format, receiving each row it does not keep as it goes.
      if (parallel && !root) parallel->serve_save();
      if (root) {
        RowBytes row_bytes;
        if (parallel) row_bytes = [parallel](int row) { return parallel->row_for_save(row); };
        result.last_checkpoint = save_checkpoint(*manifest.checkpoint.dir, model, saved, row_bytes);
        if (parallel) parallel->end_save();
        prune_checkpoints(*manifest.checkpoint.dir, manifest.checkpoint.keep_last, outcome.loss,
                          train.divergence_factor);
      }
    }
    if (result.stopped_by_signal != 0) {
      spdlog::warn("stopped by signal {} after step {}{}", result.stopped_by_signal, step,
                   result.last_checkpoint ? " (checkpoint " + result.last_checkpoint->string() + ")" : "");
      break;
    }
  }
  if (timeline)  // stopped before the step it records
    spdlog::warn("--memory-timeline: the run stopped before step {}, the step it records; nothing was written",
                 timeline_step);

  RunSummary& summary = result.summary;
  summary.steps = static_cast<std::int64_t>(step_ms.size());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  if (!step_ms.empty()) {
    summary.median_ms = median(step_ms);
    summary.tokens_per_s = static_cast<double>(tokens_per_step) / (summary.median_ms / 1000.0);
  }
  const ArenaStats stats = device_memory.stats();
  summary.peak_device_bytes = stats.peak_total;
  summary.peak_device_bytes_by_category = stats.peak;
  summary.peak_host_bytes = device->host_memory().stats().peak_total;
  summary.bytes_to_host = model.store().transfers().bytes_to_host;
  summary.bytes_to_device = model.store().transfers().bytes_to_device;
  summary.transfer_ms = 1000.0 * device->copy_stream().busy_seconds();
  summary.exposed_transfer_ms = 1000.0 * model.store().transfers().exposed_seconds;
  summary.predictor_host_bytes = controller_memory.host_bytes_live();
  summary.predictor_device_bytes = controller_memory.device_bytes_live();
  std::vector<PluginMemoryUse> plugin_memory;
  for (const PluginMemoryImpl* memory : host.plugin_memory())
    plugin_memory.push_back({memory->owner(), memory->host_bytes_live(), memory->device_bytes_live(),
                             memory->bytes_to_host() + memory->bytes_to_device()});
  summary.plugin_memory = plugin_memory;  // views into this frame and `host`: cleared below
  for (const auto& sink : stack.telemetry)
    if (Status status = sink->on_run_end(summary); !status) throw HookFailed(status.message());
  summary.plugin_memory = {};
  if (disk_tier) {
    model.store().complete_all_moves();  // the last step's state written back
    result.disk = disk_tier->stats();
    spdlog::info("disk tier: {} read, {} written, I/O busy {:.2f} s, compute waited {:.2f} s; peak on disk {}",
                 format_bytes(result.disk->bytes_read), format_bytes(result.disk->bytes_written),
                 result.disk->busy_seconds, result.disk->waited_seconds, format_bytes(result.disk->peak_total));
  }
  if (parallel) log_ranks(*parallel, stats, summary.median_ms, median(communication_ms), median(hidden_ms));
  if (options.profile && root) {
    std::cout << "\nkernel time (" << summary.steps << " steps, evaluation included)\n";
    model.profiler().print(std::cout, summary.steps);
  }
  return result;
}

double run_eval(const Manifest& manifest, PluginRegistry& registry, const std::filesystem::path& checkpoint,
                const std::optional<std::filesystem::path>& data, const BackendFactory& backend) {
  EvaluationModel run = open_for_evaluation(manifest, registry, checkpoint, backend);
  Model& model = *run.model;
  Backend* device = run.device.get();
  Stack& stack = run.stack;
  Executor executor(model, *stack.optimizer, *stack.precision, {}, {});
  const int seq_len = manifest.model.seq_len();
  if (data) {
    const auto tokenizer = tokenizer_for(manifest);
    const TokenSequence tokens = load_corpus_tokens(*data, manifest.model.vocab(), tokenizer.get());
    const std::int64_t windows = window_count(tokens, seq_len);
    if (windows < 1)
      throw DataError(data->string() + ": " + std::to_string(tokens.size()) +
                      " tokens, fewer than one window of seq_len + 1 = " + std::to_string(seq_len + 1));
    const double loss = mean_window_loss(
        executor, windows, manifest.train.micro_batch_rows(), seq_len,
        [&](std::int64_t w, std::int32_t* in, std::int32_t* out) { window_at(tokens, seq_len, w, in, out); });
    device->synchronize();  // an op's failure surfaces as itself, not as a NaN loss
    return loss;
  }
  const auto tokenizer = tokenizer_for(manifest);
  const double loss = validation_loss(executor, Dataset(data_options(manifest, tokenizer.get())), manifest);
  device->synchronize();
  return loss;
}

}  // namespace strata
