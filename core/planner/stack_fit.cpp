#include "core/planner/stack_fit.hpp"

#include <sstream>
#include <stdexcept>

#include "core/device/memory_limit_exceeded.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/util/format_bytes.hpp"
#include "core/util/process_memory.hpp"

namespace strata {

namespace {

// One strategy table of a candidate: its keys, and how the description names it.
struct StrategyChoice {
  std::string label;  // "" for none
  toml::table table;
};

std::vector<StrategyChoice> checkpoint_choices() {
  return {{"", {}},
          {"checkpoint every = 1", toml::table{{"plugin", "checkpoint"}, {"every", 1}}},
          {"checkpoint every = 1, logits recomputed",
           toml::table{{"plugin", "checkpoint"}, {"every", 1}, {"logits", "recompute"}}},
          {"checkpoint selective", toml::table{{"plugin", "checkpoint"}, {"mode", "selective"}}},
          {"checkpoint cheap", toml::table{{"plugin", "checkpoint"}, {"mode", "cheap"}}}};
}

std::vector<StrategyChoice> offload_choices(bool has_disk) {
  std::vector<StrategyChoice> choices{
      {"", {}},
      {"offload optimizer_state = host", toml::table{{"plugin", "offload"}, {"optimizer_state", "host"}}},
      {"stream 2 layers, prefetch 1",
       toml::table{{"plugin", "offload"}, {"optimizer_state", "host"}, {"max_resident_layers", 2}, {"prefetch", 1}}},
      {"stream 1 layer",
       toml::table{{"plugin", "offload"}, {"optimizer_state", "host"}, {"max_resident_layers", 1}, {"prefetch", 0}}}};
  if (has_disk) {
    choices.push_back(
        {"offload optimizer_state = disk", toml::table{{"plugin", "offload"}, {"optimizer_state", "disk"}}});
    choices.push_back(
        {"stream 1 layer, state on disk",
         toml::table{{"plugin", "offload"}, {"optimizer_state", "disk"}, {"max_resident_layers", 1}, {"prefetch", 0}}});
    choices.push_back(
        {"stream 2 layers, prefetch 1, state on disk",
         toml::table{{"plugin", "offload"}, {"optimizer_state", "disk"}, {"max_resident_layers", 2}, {"prefetch", 1}}});
    choices.push_back(
        {"stream 2 layers, prefetch 1, state and weights on disk", toml::table{{"plugin", "offload"},
                                                                               {"optimizer_state", "disk"},
                                                                               {"max_resident_layers", 2},
                                                                               {"prefetch", 1},
                                                                               {"weights", "disk"}}});
  }
  return choices;
}

// The manifest's document without the strategies the search chooses (checkpoint, offload); the
// others (LoRA, sparse layers, a third party's) stay as written.
toml::table base_document(const Manifest& manifest) {
  toml::table document = *manifest.document;
  if (toml::array* strategies = document["strategy"].as_array()) {
    toml::array kept;
    for (const toml::node& node : *strategies) {
      const toml::table* table = node.as_table();
      const std::string plugin = table ? (*table)["plugin"].value_or(std::string()) : std::string();
      if (plugin != "checkpoint" && plugin != "offload") kept.push_back(node);
    }
    document.insert_or_assign("strategy", std::move(kept));
  }
  return document;
}

void set(toml::table& document, const std::string& table, const std::string& key, const toml::node& value) {
  if (!document.contains(table)) document.insert(table, toml::table{});
  document[table].as_table()->insert_or_assign(key, value);
}

std::string text_of(const toml::table& document) {
  std::ostringstream out;
  out << document << '\n';
  return out.str();
}

}  // namespace

FitBudget parse_fit_budget(const std::string& text) {
  FitBudget budget;
  std::stringstream parts(text);
  std::string part;
  const auto refuse = [&](const std::string& why) {
    throw ManifestError("--fit " + text + ": " + why +
                        " (expected device=SIZE[,host=SIZE][,disk=SIZE], sizes such as 8GiB or 512MiB)");
  };
  while (std::getline(parts, part, ',')) {
    const auto equals = part.find('=');
    if (equals == std::string::npos) refuse("'" + part + "' is not home=size");
    const std::string home = part.substr(0, equals);
    const std::optional<std::uint64_t> bytes = parse_bytes(part.substr(equals + 1));
    if (!bytes || *bytes == 0) refuse("'" + part.substr(equals + 1) + "' is not a size");
    if (home == "device")
      budget.device = *bytes;
    else if (home == "host")
      budget.host = *bytes;
    else if (home == "disk")
      budget.disk = *bytes;
    else
      refuse("no home '" + home + "' (device, host or disk)");
  }
  if (budget.device == 0) refuse("no device budget");
  return budget;
}

FitResult fit_stack(const Manifest& manifest, PluginRegistry& registry, const Calibration& calibration,
                    const FitBudget& budget, bool allow_numerics,
                    const std::function<void(std::size_t, std::size_t)>& progress) {
  const toml::table base = base_document(manifest);
  const std::string precision = manifest.precision.plugin;
  const std::string optimizer = manifest.optimizer.plugin;
  std::vector<std::string> precisions{precision};
  std::vector<std::string> optimizers{optimizer};
  if (allow_numerics) {
    for (const char* other : {"bf16", "int8", "nf4"})
      if (precision != other) precisions.push_back(other);
    if (optimizer == "adamw") optimizers.push_back("adamw8bit");
  }
  std::vector<int> micro_batches;
  for (const int m : {1, 2, 4, 8})
    if (manifest.train.batch % m == 0) micro_batches.push_back(m);

  // Every combination, as manifests.
  FitResult result;
  for (const std::string& p : precisions)
    for (const std::string& o : optimizers)
      for (const StrategyChoice& checkpoint : checkpoint_choices())
        for (const StrategyChoice& offload : offload_choices(manifest.device.disk_path.has_value()))
          for (const char* attention : {"fast", "flash"})
            for (const int m : micro_batches)
              for (const char* update : {"full", "fused"}) {
                if (std::string_view(update) == "fused" && m != 1) continue;  // refused: nothing accumulates
                toml::table document = base;
                toml::array strategies =
                    document["strategy"].as_array() ? *document["strategy"].as_array() : toml::array{};
                std::string description;
                const auto add = [&description](const std::string& part) {
                  if (!part.empty()) description += (description.empty() ? "" : ", ") + part;
                };
                if (p != precision) {
                  document.insert_or_assign("precision", toml::table{{"plugin", p}});
                  add("precision " + p);
                }
                if (o != optimizer) {
                  const toml::table* given = base["optimizer"].as_table();  // absent: the default
                  toml::table table = given != nullptr ? *given : toml::table{};
                  table.insert_or_assign("plugin", o);
                  document.insert_or_assign("optimizer", std::move(table));
                  add("optimizer " + o);
                }
                for (const StrategyChoice* choice : {&checkpoint, &offload})
                  if (!choice->label.empty()) {
                    strategies.push_back(choice->table);
                    add(choice->label);
                  }
                document.insert_or_assign("strategy", std::move(strategies));
                set(document, "kernels", "attention", toml::value<std::string>(attention));
                add(std::string("attention ") + attention);
                set(document, "train", "micro_batches", toml::value<std::int64_t>(m));
                add("micro_batches " + std::to_string(m));
                set(document, "train", "update", toml::value<std::string>(update));
                if (std::string_view(update) == "fused") add("update fused");
                if (budget.device > 0)
                  set(document, "device", "memory_limit", toml::value<std::string>(size_text(budget.device)));
                FitCandidate candidate;
                candidate.description = description;
                candidate.manifest_text = text_of(document);
                candidate.changes_numerics = p != precision || o != optimizer;
                result.candidates.push_back(std::move(candidate));
              }

  // Each planned and priced; a stack the host refuses is kept with its reason. A plugin kernel's
  // times carry over from stack to stack.
  KernelTimings timings;
  // The process's own memory as the search starts, for every stack's RSS: a later dry run's start
  // would count what earlier ones left in the heap.
  const std::uint64_t process_bytes = resident_bytes();
  for (std::size_t i = 0; i < result.candidates.size(); ++i) {
    FitCandidate& candidate = result.candidates[i];
    if (progress) progress(i, result.candidates.size());
    try {
      const Manifest stack = parse_manifest(candidate.manifest_text, manifest.path);
      candidate.prediction = predict_memory(stack, registry, &calibration, &timings);
      candidate.prediction->process_bytes = process_bytes;
    } catch (const ManifestError& e) {
      candidate.refusal = e.what();
      continue;
    } catch (const std::exception& e) {
      candidate.refusal = e.what();
      continue;
    }
    const MemoryPrediction& p = *candidate.prediction;
    candidate.fits = !p.over_limit && p.device.peak_total <= budget.device &&
                     (budget.host == 0 || p.host.peak_total <= budget.host) &&
                     (budget.disk == 0 || !p.disk || p.disk->peak_total <= budget.disk);
    if (!result.smallest || candidate.device_peak() < result.candidates[*result.smallest].device_peak())
      result.smallest = i;
    // Among the stacks that fit the device, the one with the smallest host peak: what to name when
    // the host is the home that does not fit.
    if (p.device.peak_total <= budget.device &&
        (!result.smallest_host ||
         p.host.peak_total < result.candidates[*result.smallest_host].prediction->host.peak_total))
      result.smallest_host = i;
    if (candidate.fits && (!result.chosen || candidate.step_ms() < result.candidates[*result.chosen].step_ms()))
      result.chosen = i;
  }
  if (progress) progress(result.candidates.size(), result.candidates.size());

  // The front: ascending in device peak, each faster than every smaller one.
  std::vector<std::size_t> planned;
  for (std::size_t i = 0; i < result.candidates.size(); ++i)
    if (result.candidates[i].prediction) planned.push_back(i);
  std::sort(planned.begin(), planned.end(), [&](std::size_t a, std::size_t b) {
    const FitCandidate& x = result.candidates[a];
    const FitCandidate& y = result.candidates[b];
    return x.device_peak() != y.device_peak() ? x.device_peak() < y.device_peak() : x.step_ms() < y.step_ms();
  });
  double fastest = 0.0;
  for (const std::size_t i : planned)
    if (result.front.empty() || result.candidates[i].step_ms() < fastest) {
      result.front.push_back(i);
      fastest = result.candidates[i].step_ms();
    }
  return result;
}

}  // namespace strata
