// A training run's set-up, in the order it happens: the ranks agree on the run; threads, backend
// and stack; the data and the outputs, checked before anything is written; the model placed,
// initialised (or loaded); a resume.
#include "core/training/training_session.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/data/data_fingerprint.hpp"
#include "core/distributed/data_parallel.hpp"
#include "core/distributed/device_communicator.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/executor/hook_failed.hpp"
#include "core/training/run_inputs.hpp"
#include "core/util/format_bytes.hpp"
#include "core/util/random.hpp"

namespace strata {

namespace {

// One number for a manifest as read (--set included) and the options that steer the run: ranks
// compare theirs before step 1.
std::uint64_t run_digest(const Manifest& manifest, const TrainOptions& options) {
  std::ostringstream text;
  text << *manifest.document << "\nresume " << (options.resume ? options.resume->string() : "-") << "\nstop after "
       << options.stop_after_step << "\nfresh " << options.fresh << "\nforce resume " << options.force_resume;
  return splitmix64(std::hash<std::string>{}(text.str()));
}

// Every rank must train the same run: the manifest and options of each compared with rank 0's.
void check_ranks_agree(Communicator& communicator, const Manifest& manifest, const TrainOptions& options) {
  const int ranks = communicator.size();
  if (ranks <= 1) return;
  const double digest = static_cast<double>(run_digest(manifest, options) >> 11);  // exact in a double
  const std::vector<double> digests = all_gather_doubles(communicator, {&digest, 1});
  std::string differing;
  for (int r = 1; r < ranks; ++r)
    if (digests[static_cast<std::size_t>(r)] != digests[0]) differing += " " + std::to_string(r);
  if (!differing.empty())
    throw ManifestError(manifest.path.string() +
                        ": the manifest (with its --set values) or the options "
                        "(--resume, --stop-after, --fresh, --force-resume) of rank(s)" +
                        differing + " differ from rank 0's: every rank must train the same run");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TrainingSession::TrainingSession(const Manifest& global_manifest, PluginRegistry& registry, const TrainOptions& options)
    : global_manifest_(global_manifest),
      options_(options),
      communicator_(options.communicator != nullptr ? *options.communicator : alone_),
      ranks_(communicator_.size()),
      rank_(communicator_.rank()),
      root_(rank_ == 0) {
  check_ranks_agree(communicator_, global_manifest, options);
  data_parallel_ = ranks_ > 1 || options.data_parallel_with_one_rank;
  manifest_ = data_parallel_ ? rank_manifest(global_manifest, rank_, ranks_) : global_manifest;
  if (data_parallel_) manifest_.device.kind = this_rank_device_kind(manifest_.device.kind);  // a GPU each
  // threads = 0 under mpirun: this machine's cores shared among the ranks on it.
  const char* local_ranks = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  configure_threads(manifest_.train.threads > 0 || ranks_ == 1 || local_ranks == nullptr
                        ? manifest_.train.threads
                        : std::max(1, omp_get_num_procs() / std::max(1, std::atoi(local_ranks))));
  // The backend first: an unknown device is invalid input, refused before anything is written,
  // and the backend must outlive the plugin objects (their ops() points into it).
  device_ = options.backend ? options.backend(manifest_) : backend_for(manifest_);
  host_.emplace(manifest_.model.info(), manifest_.device.kind);
  host_->set_disk_tier(manifest_.device.disk_path.has_value());
  stack_ = build_stack(manifest_, registry, *host_, root_ ? "console" : "");  // rank 0 alone reports
  if (std::vector<std::string> problems = fused_update_problems(manifest_, stack_); !problems.empty())
    throw ManifestError(problems);
  if (data_parallel_)
    if (std::vector<std::string> problems = data_parallel_problems(global_manifest, stack_, ranks_); !problems.empty())
      throw ManifestError(problems);
  if (global_manifest.distributed.present && !data_parallel_)
    spdlog::info("[distributed]: one rank (start with mpirun -np N for more)");
  // The rows go through NCCL between GPUs; the rest (and host rows) through `communicator`.
  device_communicator_ = data_parallel_ ? communicator_for_device(communicator_, *device_) : nullptr;
  rows_communicator_ = !data_parallel_ ? nullptr : device_communicator_ ? device_communicator_.get() : &communicator_;
  if (data_parallel_)
    spdlog::info("data parallel: rank {} of {} through {}, zero = {}, {} of the batch's {} rows", rank_, ranks_,
                 rows_communicator_->name(), manifest_.distributed.zero, manifest_.train.batch,
                 global_manifest.train.batch);
  const TrainSpec& train = manifest_.train;
  tokenizer_ = tokenizer_for(manifest_);
  dataset_.emplace(data_options(manifest_, tokenizer_.get()));
  if (dataset_->loss_masked() && root_)
    spdlog::info("loss mask: {} of {} training tokens are targets ({:.1f}%); the loss is their mean",
                 dataset_->train_targets(), dataset_->train_tokens(),
                 100.0 * static_cast<double>(dataset_->train_targets()) /
                     static_cast<double>(std::max<std::int64_t>(dataset_->train_tokens(), 1)));
  if (train.sample_every > 0) sampler_.emplace(manifest_, tokenizer_.get(), *dataset_);  // its prompt checked now
  // What a save records of the data, and a resume compares: its content, not only its path, and
  // the tokenizer that turned text into tokens.
  if (manifest_.checkpoint.dir || options.resume) {
    data_identity_ = data_fingerprint(manifest_.data.train);
    // A loss mask beside a token file decides which positions train: a resume checks all of it.
    if (dataset_->loss_masked()) data_identity_ += ",mask:" + dataset_->loss_mask_identity();
  }
  if (!data_identity_.empty() && tokenizer_)
    data_identity_ += ",tokenizer:" + std::to_string(tokenizer_->fingerprint());
  // The checkpoint directory: writable (checked now, not at the first save), this run's alone, and
  // cleared of partial saves a killed run left.
  memory_timeline_ = root_ ? options.memory_timeline : std::nullopt;
  outputs_.emplace(manifest_, options.resume, options.overwrite_telemetry, memory_timeline_);  // locked in begin()
  if (manifest_.checkpoint.dir && root_) {  // rank 0 alone writes the saves
    check_checkpoint_directory(*manifest_.checkpoint.dir);
    checkpoint_lock_.emplace(*manifest_.checkpoint.dir);
    if (const int removed = remove_stale_partial_saves(*manifest_.checkpoint.dir); removed > 0)
      spdlog::info("removed {} partial save(s) a stopped run left in {}", removed, manifest_.checkpoint.dir->string());
  }
  // A run that does not continue the saves in its directory would number its own from step 1 over
  // them, and prune them with keep_last: it is refused, or with --fresh moves them aside (begin()).
  earlier_run_ =
      manifest_.checkpoint.dir && root_ && check_earlier_run(*manifest_.checkpoint.dir, options.resume, options.fresh);

  host_->use_backend(*device_);
  // A large model takes a while to place and initialise: say what is happening, and how long it took.
  const auto setup_start = std::chrono::steady_clock::now();
  spdlog::info("placing {:.2f}M parameters on {}", static_cast<double>(manifest_.model.parameter_count()) / 1e6,
               device_->name());
  placed_ = place_model(manifest_, *device_, stack_, stack_.attention_on(*device_, manifest_.model.attention_shape(1)),
                        stack_.storage_on(*device_), false, rows_communicator_);
  model_ = placed_.model.get();
  parallel_ = placed_.data_parallel.get();
  executor_ = placed_.executor.get();
  executor_->observe_host_updates([this](bool on_host) { host_->set_update_on_host(on_host); });
  disk_tier_ = placed_.disk_tier.get();
  // A resume loads its trained weights over these; a frozen base stays as loaded here. A Hugging
  // Face directory holds every base weight, so only the adapters (if any) are drawn before it.
  const std::optional<std::filesystem::path> starting = manifest_.starting_weights();
  const std::optional<std::filesystem::path> base =
      starting && (!options.resume || !stack_.trainable.trains_everything()) ? starting : std::nullopt;
  spdlog::info("allocated in {:.1f} s: {} on the device, {} on the host", seconds_since(setup_start),
               format_bytes(device_->device_memory().live_total()), format_bytes(device_->host_memory().live_total()));
  const auto init_start = std::chrono::steady_clock::now();
  // An initialisation, and a resume, write this rank's own rows alone (Model::write_values,
  // load_checkpoint): another rank's are drawn or read, and dropped.
  if (initialise_before(*model_, train.seed, base))
    spdlog::info("the base weights come from {}: only adapters are initialised (seed {})", base->string(), train.seed);
  else
    spdlog::info("weights initialised (seed {}) in {:.1f} s", train.seed, seconds_since(init_start));
  if (base) {
    load_weights(*base, *model_);
    spdlog::info("weights from {} in {:.1f} s", base->string(), seconds_since(init_start));
  }
  if (options.print_table && root_) model_->table().print(std::cout);

  last_step_ = options.stop_after_step > 0 ? std::min(options.stop_after_step, train.steps) : train.steps;
  if (options.resume) resume(*options.resume);
}

TrainingSession::~TrainingSession() = default;

void TrainingSession::resume(const std::filesystem::path& checkpoint) {
  const TrainSpec& train = manifest_.train;
  const TrainerState state = load_checkpoint(checkpoint, *model_, manifest_.optimizer.plugin, stack_.optimizer.get());
  // The checkpoint must come from this run: the same seed (data order), stack and data.
  std::string differences;
  if (state.seed != train.seed)
    differences += "\n  seed: saved " + std::to_string(state.seed) + ", manifest " + std::to_string(train.seed);
  if (!state.stack.empty() && state.stack != stack_.description)
    differences += "\n  stack: saved '" + state.stack + "', manifest '" + stack_.description + "'";
  if (!state.data.empty() && state.data != manifest_.data.train.string())
    differences += "\n  data: saved '" + state.data + "', manifest '" + manifest_.data.train.string() + "'";
  else if (!state.data_fingerprint.empty() && state.data_fingerprint != data_identity_)
    differences += "\n  data: '" + manifest_.data.train.string() + "' changed since the save (saved " +
                   state.data_fingerprint + ", now " + data_identity_ + ")";
  if (!differences.empty() && !options_.force_resume)
    throw CheckpointError(checkpoint.string() + ": saved by a different run:" + differences +
                          "\n(resume anyway with --force-resume)");
  if (!differences.empty()) spdlog::warn("resuming a different run (--force-resume):{}", differences);
  if (Status status = stack_.precision->restore_state(state.precision); !status)
    throw CheckpointError(checkpoint.string() + ": " + status.message());
  if (stack_.predictor)
    if (Status status = stack_.predictor->restore_state(state.predictor); !status)
      throw CheckpointError(checkpoint.string() + ": " + status.message());
  for (std::size_t i = 0; i < stack_.strategies.size(); ++i) {
    const auto saved = state.strategies.find(strategy_state_key(i, manifest_.strategies[i].plugin));
    const std::string_view strategy_state = saved == state.strategies.end() ? "" : std::string_view(saved->second);
    if (Status status = stack_.strategies[i]->restore_state(strategy_state); !status)
      throw CheckpointError(checkpoint.string() + ": " + status.message());
  }
  executor_->restore_fused_clip_norm(state.fused_clip_norm);
  start_step_ = state.step;
  spdlog::info("resumed from {} at step {}", resolve_checkpoint(checkpoint).string(), start_step_);
  // Nothing to train is said plainly, and nothing is written (no telemetry, no save, no prune).
  const std::int64_t target = options_.stop_after_step > 0 ? options_.stop_after_step : train.steps;
  if (start_step_ >= target)
    nothing_to_train_ = "the checkpoint is at step " + std::to_string(start_step_) + ", and this run stops at " +
                        (options_.stop_after_step > 0 ? "--stop-after " : "train.steps = ") + std::to_string(target) +
                        ": there is nothing to train (raise " +
                        (options_.stop_after_step > 0 ? "--stop-after" : "train.steps") + " to go on)";
}

void TrainingSession::begin() {
  if (parallel_) {
    // The owners' initialised (or loaded) weights to every rank: at zero 1 and 2 a rank rounds only
    // the masters it keeps. Also the point every rank reaches before rank 0 moves saves aside.
    parallel_->share_updated_parameters();
    (void)parallel_->largest(0);
  }
  if (options_.fresh && earlier_run_)  // after init_from and --resume have read what they need
    spdlog::info("--fresh: moved the earlier run's saves to {}", move_saves_aside(*manifest_.checkpoint.dir).string());

  const TrainSpec& train = manifest_.train;
  tokens_per_step_ = static_cast<std::int64_t>(global_manifest_.train.batch) * manifest_.model.seq_len();
  RunInfo info{
      manifest_.path.string(),           stack_.description,           train.steps, start_step_, tokens_per_step_,
      manifest_.model.parameter_count(), manifest_.device.memory_limit};
  outputs_->lock();
  for (const auto& sink : stack_.telemetry)
    if (Status status = sink->on_run_start(info); !status) throw HookFailed(status.message());

  const int rows = train.micro_batch_rows();
  inputs_.resize(static_cast<std::size_t>(train.micro_batches) * rows * manifest_.model.seq_len());
  targets_.resize(inputs_.size());
  micro_size_ = inputs_.size() / static_cast<std::size_t>(train.micro_batches);
  for (int m = 0; m < train.micro_batches; ++m)
    micro_batches_.push_back({std::span<const std::int32_t>(inputs_).subspan(m * micro_size_, micro_size_),
                              std::span<const std::int32_t>(targets_).subspan(m * micro_size_, micro_size_)});
  divergence_.emplace(DivergenceLimits{.factor = train.divergence_factor, .steps = train.divergence_steps});
  stop_signal_.emplace();
  run_start_ = std::chrono::steady_clock::now();
  model_->profiler().reset();
  if (options_.profile && device_->name() != "cpu")
    model_->profiler().set_fence([this] { device_->wait_for_compute(); });
  timeline_step_ = std::min(start_step_ + 3, last_step_);
  if (memory_timeline_) timeline_.emplace(device_->device_memory(), device_->host_memory(), *executor_);
}

}  // namespace strata
