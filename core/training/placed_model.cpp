#include "core/training/placed_model.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

#include "core/errors/manifest_error.hpp"
#include "core/model/make_model.hpp"
#include "core/training/training_run.hpp"
#include "core/util/address_space.hpp"

namespace strata {

PlacedModel place_model(const Manifest& manifest, Backend& device, Stack& stack, Kernel& attention,
                        const StorageTypes& storage, bool disk_accounted_only, Communicator* communicator) {
  const TrainSpec& train = manifest.train;
  PlacedModel placed;
  placed.model = make_model(manifest.model, device, attention,
                            ModelOptions{train.micro_batch_rows(), state_layout_of(*stack.optimizer),
                                         Allocation::deferred, storage, Purpose::training, stack.trainable});
  Model& model = *placed.model;
  if (communicator != nullptr)
    placed.data_parallel = std::make_unique<DataParallel>(*communicator, model.store(), manifest.distributed.zero,
                                                          manifest.distributed.overlap);
  placed.executor = std::make_unique<Executor>(
      model, *stack.optimizer, *stack.precision, stack.strategy_pointers(),
      ExecutorOptions{train.steps, train.warmup_steps, train.lr, stack.predictor.get(), stack.strategy_labels,
                      train.update, train.fused_clip, placed.data_parallel.get()});
  placed.executor->attach_without_allocating();  // strategies place the rows
  if (placed.data_parallel) {
    if (placed.data_parallel->zero() >= 1 && model.store().residency().any_on_disk())
      throw ManifestError(manifest.path.string() +
                          ": [distributed] zero = " + std::to_string(placed.data_parallel->zero()) +
                          " shards the optimizer state, and a strategy puts rows on disk: use zero = 0 with the "
                          "disk tier");
    placed.data_parallel->shard_rows();
  }
  if (model.store().residency().any_on_disk()) {
    placed.disk_tier = open_disk_tier(manifest, device, stack.predictor != nullptr, disk_accounted_only);
    model.store().residency().use_disk_tier(*placed.disk_tier);
    if (!disk_accounted_only) spdlog::info("disk tier: {}", placed.disk_tier->description());
  }
  model.store().residency().allocate_persistent();  // then allocated where they belong
  // Room for a BLAS work buffer per thread, proved now rather than found missing mid-step.
  if (const std::string shortfall =
          address_space_shortfall(2 * static_cast<std::uint64_t>(omp_get_max_threads()) * kOpenBlasBufferBytes);
      !shortfall.empty())
    throw std::runtime_error(shortfall);
  placed.controller_memory = std::make_unique<PluginMemoryImpl>(device, manifest.predictor.plugin);
  placed.executor->attach_controller(*placed.controller_memory);
  return placed;
}

}  // namespace strata
