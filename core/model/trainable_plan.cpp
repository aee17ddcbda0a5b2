#include "core/model/trainable_plan.hpp"

#include <algorithm>

namespace strata {

std::string describe_training(const TrainablePlan& plan, int n_layer) {
  if (plan.trains_everything()) return "every parameter";
  // The adapters, grouped by what they are ("lora rank 8 alpha 16"), each group's targets in order.
  std::vector<std::pair<std::string, std::string>> groups;  // description, targets
  for (const PlannedAdapter& adapter : plan.adapters) {
    const std::string kind = adapter.adapter != nullptr ? adapter.adapter->describe() : std::string();
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == kind; });
    if (group == groups.end()) group = groups.insert(groups.end(), {kind, std::string()});
    if ((" " + group->second + " ").find(" " + adapter.target + " ") == std::string::npos)
      group->second += (group->second.empty() ? "" : " ") + adapter.target;
  }
  int frozen = 0, skipped = 0;
  for (int layer = 0; layer < n_layer; ++layer) {
    frozen += plan.block(layer) == BlockTraining::freeze ? 1 : 0;
    skipped += plan.skips(layer) ? 1 : 0;
  }
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  for (const auto& [kind, targets] : groups)
    add("adapters " + (kind.empty() ? "" : "(" + kind + ") ") + "on " + targets);
  if (!groups.empty() && frozen == n_layer && !plan.embeddings && !plan.head) return text + " (the base frozen)";
  if (frozen > 0) add(std::to_string(frozen) + " of " + std::to_string(n_layer) + " blocks frozen");
  if (skipped > 0) add(std::to_string(skipped) + " of " + std::to_string(n_layer) + " blocks skipped");
  if (!plan.embeddings) add("embeddings frozen");
  if (!plan.head) add("head frozen");
  return text;
}

}  // namespace strata
