#pragma once
// What two manifests say about comparing their runs' losses: whether they train the same model on
// the same batches (if not, a loss difference means nothing), and whether they train it with
// another optimizer or learning-rate schedule, or train other parameters (then a loss difference is
// the point of the comparison, not a fault of the stack).
#include <optional>
#include <string>
#include <vector>

#include "core/manifest/manifest.hpp"

namespace strata {

struct AbConditions {
  // The first field that differs in model, data, batch, seed or steps: "model.n_layer 2 vs 4".
  std::optional<std::string> not_comparable;
  // Every optimizer difference (plugin, its table's keys, train.lr, train.warmup_steps):
  // "train.lr 0.002 vs 0.004".
  std::vector<std::string> optimizer_changes;
  // Why validation losses cannot be compared when train losses can: "train.eval_batches 2 vs 8".
  std::optional<std::string> val_not_comparable;
  // What trains, when the runs' strategies plan it differently (LoRA against a full fine-tune):
  // "what trains: every parameter vs adapters on q v (the base frozen)". Another training, as an
  // optimizer change is: the loss difference is the comparison's point. Set by `strata ab`, which
  // builds each manifest's stack (ab_command.cpp).
  std::optional<std::string> training_change;
};

// Both manifests as the runs see them: loaded with the same --set overrides.
AbConditions compare_conditions(const Manifest& reference, const Manifest& run);

}  // namespace strata
