#include "core/model/trainable_plan.hpp"

#include <algorithm>

namespace strata {

std::string describe_training(const TrainablePlan& plan, int n_layer) {
  if (plan.trains_everything()) return "every parameter";
  std::vector<std::string> targets;
  for (const PlannedAdapter& adapter : plan.adapters)
    if (std::find(targets.begin(), targets.end(), adapter.target) == targets.end()) targets.push_back(adapter.target);
  int frozen = 0, skipped = 0;
  for (int layer = 0; layer < n_layer; ++layer) {
    frozen += plan.block(layer) == BlockTraining::freeze ? 1 : 0;
    skipped += plan.skips(layer) ? 1 : 0;
  }
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (!targets.empty()) {
    std::string names;
    for (const std::string& target : targets) names += (names.empty() ? "" : " ") + target;
    add("adapters on " + names);
  }
  if (!targets.empty() && frozen == n_layer && !plan.embeddings && !plan.head) return text + " (the base frozen)";
  if (frozen > 0) add(std::to_string(frozen) + " of " + std::to_string(n_layer) + " blocks frozen");
  if (skipped > 0) add(std::to_string(skipped) + " of " + std::to_string(n_layer) + " blocks skipped");
  if (!plan.embeddings) add("embeddings frozen");
  if (!plan.head) add("head frozen");
  return text;
}

}  // namespace strata
