#pragma once
// A model placed for training as `strata train` places it: built on a backend with the stack's
// attention kernel and storage, its rows placed by the strategies (on disk through the tier when
// one puts them there), allocated, and its executor attached. `strata train` and `strata plan`'s
// dry run (core/planner/) share it, so a plan allocates what a run allocates, in the same order.
#include <memory>

#include "core/device/backend.hpp"
#include "core/distributed/data_parallel.hpp"
#include "core/executor/executor.hpp"
#include "core/manifest/manifest.hpp"
#include "core/model/model.hpp"
#include "core/plugin/plugin_memory_impl.hpp"
#include "core/plugin/stack.hpp"
#include "core/residency/disk_tier.hpp"

namespace strata {

struct PlacedModel {
  // Declared in the order they must be built; destroyed in reverse: the executor before the memory
  // it lends the predictor, both before the model, the model before the tier that holds its rows.
  std::unique_ptr<DiskTier> disk_tier;  // null unless a strategy puts rows on disk
  std::unique_ptr<Model> model;
  std::unique_ptr<DataParallel> data_parallel;  // null without a communicator
  std::unique_ptr<PluginMemoryImpl> controller_memory;
  std::unique_ptr<Executor> executor;
};

// The weights are allocated, not initialised. With `disk_accounted_only` the disk tier keeps no
// file and moves no bytes (DiskTierOptions::account_only).
// With a `communicator`, the model trains data parallel: the rows are sharded by [distributed] zero
// (rows another rank keeps are never allocated here).
PlacedModel place_model(const Manifest& manifest, Backend& device, Stack& stack, Kernel& attention,
                        const StorageTypes& storage, bool disk_accounted_only = false,
                        Communicator* communicator = nullptr);

}  // namespace strata
