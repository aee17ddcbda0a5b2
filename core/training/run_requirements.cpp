#include "core/training/run_requirements.hpp"

#include <cblas.h>
#include <omp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <optional>

#include "core/device/backends.hpp"
#include "core/distributed/device_communicator.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/plugin/stack.hpp"

namespace strata {

std::unique_ptr<Backend> backend_for(const Manifest& manifest) {
  if (const std::string why = backend_unavailable_reason(manifest.device.kind); !why.empty())
    throw ManifestError(manifest.path.string() + ": [device] kind = \"" + manifest.device.kind + "\": " + why);
  return make_backend(manifest.device.kind, manifest.device.memory_limit, manifest.device.tf32);
}

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

namespace {

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

}  // namespace

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

}  // namespace strata
