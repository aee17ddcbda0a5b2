#pragma once
// Which parts of a model train, as the strategies planned them (strata/parameter_plan.hpp) before
// the model is built. The model family reads it: a frozen parameter is added without gradient,
// optimizer state or master; a skipped block passes its input through.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/matmul_adapter.hpp"

namespace strata {

enum class BlockTraining : std::uint8_t { train, freeze, skip };

// A matmul adapter on every non-skipped block's matrix named `target` (core/model/adapter_targets.hpp).
struct PlannedAdapter {
  std::string target;
  MatmulAdapter* adapter = nullptr;  // owned by a strategy object, which outlives the model
};

struct TrainablePlan {
  std::vector<BlockTraining> blocks;  // per layer; empty or short: the rest train
  bool embeddings = true;
  bool head = true;
  std::vector<PlannedAdapter> adapters;

  BlockTraining block(int layer) const noexcept {
    const auto index = static_cast<std::size_t>(layer);
    return layer >= 0 && index < blocks.size() ? blocks[index] : BlockTraining::train;
  }
  bool block_trains(int layer) const noexcept { return block(layer) == BlockTraining::train; }
  bool skips(int layer) const noexcept { return block(layer) == BlockTraining::skip; }
  // Nothing frozen, skipped or adapted: a checkpoint holds every weight.
  bool trains_everything() const noexcept {
    for (BlockTraining training : blocks)
      if (training != BlockTraining::train) return false;
    return embeddings && head && adapters.empty();
  }
};

// What trains, in a few words: "every parameter", "adapters (lora rank 8 alpha 16) on q v (the base
// frozen)", "4 of 12 blocks frozen, embeddings frozen" (`strata ab` names it when two runs differ
// in it, so another rank is another training too).
std::string describe_training(const TrainablePlan& plan, int n_layer);

}  // namespace strata
