#pragma once
// What a manifest needs before it can train, checked before anything is written, and the pieces
// of the set-up every command shares (core/training/training_session.cpp, the planner's dry run,
// `strata validate`): the backend, the threads, the disk tier, one rank's share of the batch.
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/manifest/manifest.hpp"
#include "core/residency/disk_tier.hpp"

namespace strata {

struct Stack;

// What one rank of `ranks` trains: its share of the batch (its micro batches are those of one
// process with ranks x micro_batches of them), and no telemetry but rank 0's.
Manifest rank_manifest(const Manifest& manifest, int rank, int ranks);

// What keeps [distributed] from running this manifest on `ranks` ranks (one or more), one problem
// each.
std::vector<std::string> data_parallel_problems(const Manifest& manifest, const Stack& stack, int ranks);

// What keeps the manifest's disk tier from working, one problem each: a disk_path that cannot hold
// the tier's files; and, when a strategy puts rows on disk, no disk_path, or a phase controller.
std::vector<std::string> disk_tier_problems(const Manifest& manifest, bool rows_on_disk, bool has_predictor);

// What keeps train.update = "fused" from running with this stack, one problem each: an optimizer
// that does not take per-block steps (SDK 9.4), a phase controller, a scaled loss (fp16's: its
// overflow steps are skipped by design).
std::vector<std::string> fused_update_problems(const Manifest& manifest, const Stack& stack);

// The disk tier in [device] disk_path, its staging accounted in the backend's host arena; throws
// ManifestError with disk_tier_problems when there are any. `account_only`: DiskTierOptions'.
std::unique_ptr<DiskTier> open_disk_tier(const Manifest& manifest, Backend& device, bool has_predictor = false,
                                         bool account_only = false);

// The manifest's [device] backend; throws ManifestError when this build has none of that kind.
std::unique_ptr<Backend> backend_for(const Manifest& manifest);

// Sets OpenMP and OpenBLAS to the same thread count (0: all cores).
void configure_threads(int threads);

}  // namespace strata
