#include "ab_conditions.hpp"

#include <cstdio>
#include <set>

#include "command_support.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"

namespace strata {

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// A TOML value as a manifest would spell it: 0.1, "cosine", [0.9, 0.95].
std::string spelled(const toml::node& node) {
  if (const auto* value = node.as_floating_point()) return number(value->get());
  if (const auto* value = node.as_integer()) return std::to_string(value->get());
  if (const auto* value = node.as_boolean()) return value->get() ? "true" : "false";
  if (const auto* value = node.as_string()) return '"' + value->get() + '"';
  if (const auto* array = node.as_array()) {
    std::string text = "[";
    for (std::size_t i = 0; i < array->size(); ++i) text += (i > 0 ? ", " : "") + spelled(*array->get(i));
    return text + "]";
  }
  if (const auto* table = node.as_table()) {
    std::string text = "{";
    for (const auto& [key, value] : *table)
      text += (text.size() > 1 ? ", " : "") + std::string(key.str()) + " = " + spelled(value);
    return text + "}";
  }
  return "?";
}

std::string path_text(const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::weakly_canonical(path, error);
  return error ? path.string() : absolute.string();
}

// Records "name a vs b" when the two spellings differ.
struct Differences {
  std::vector<std::string> found;
  void check(const std::string& name, const std::string& reference, const std::string& run) {
    if (reference != run) found.push_back(name + " " + reference + " vs " + run);
  }
  void check(const std::string& name, double reference, double run) {
    if (reference != run) found.push_back(name + " " + number(reference) + " vs " + number(run));
  }
  void check(const std::string& name, std::int64_t reference, std::int64_t run) {
    if (reference != run) found.push_back(name + " " + std::to_string(reference) + " vs " + std::to_string(run));
  }
  void check(const std::string& name, int reference, int run) {
    check(name, static_cast<std::int64_t>(reference), static_cast<std::int64_t>(run));
  }
  void check(const std::string& name, bool reference, bool run) {
    check(name, std::string(reference ? "true" : "false"), std::string(run ? "true" : "false"));
  }
};

// Model, data, batch, seed and steps: what makes two runs see the same batches in the same order
// on the same network. Listed in manifest order, so the first difference is the one named.
std::vector<std::string> condition_differences(const Manifest& a, const Manifest& b) {
  Differences d;
  d.check("model.arch", '"' + a.model.arch + '"', '"' + b.model.arch + '"');
  if (!d.found.empty()) return d.found;  // the shapes below are per family
  const auto x = a.model.family().shape_keys(a.model.shape), y = b.model.family().shape_keys(b.model.shape);
  for (std::size_t i = 0; i < x.size(); ++i) d.check(x[i].first, x[i].second, y[i].second);
  d.check("data.train", path_text(a.data.train), path_text(b.data.train));
  d.check("data.val", a.data.val ? path_text(*a.data.val) : "(the split)",
          b.data.val ? path_text(*b.data.val) : "(the split)");
  // Without a val file the split decides which tokens train: val_fraction is part of the data.
  if (!a.data.val && !b.data.val) d.check("data.val_fraction", a.data.val_fraction, b.data.val_fraction);
  d.check("train.batch", a.train.batch, b.train.batch);
  // Batches are drawn per (seed, step, micro batch, row): another split draws other windows.
  d.check("train.micro_batches", a.train.micro_batches, b.train.micro_batches);
  d.check("train.seed", static_cast<std::int64_t>(a.train.seed), static_cast<std::int64_t>(b.train.seed));
  d.check("train.steps", a.train.steps, b.train.steps);
  return d.found;
}

std::vector<std::string> optimizer_differences(const Manifest& a, const Manifest& b) {
  Differences d;
  d.check("optimizer.plugin", '"' + a.optimizer.plugin + '"', '"' + b.optimizer.plugin + '"');
  std::set<std::string> keys;
  for (const toml::table* table : {a.optimizer.table, b.optimizer.table})
    if (table != nullptr)
      for (const auto& [key, value] : *table)
        if (key != "plugin") keys.insert(std::string(key.str()));
  auto value_of = [](const toml::table* table, const std::string& key) {
    const toml::node* node = table != nullptr ? table->get(key) : nullptr;
    return node != nullptr ? spelled(*node) : std::string("(default)");
  };
  for (const std::string& key : keys)
    d.check("optimizer." + key, value_of(a.optimizer.table, key), value_of(b.optimizer.table, key));
  d.check("train.lr", a.train.lr, b.train.lr);
  d.check("train.warmup_steps", a.train.warmup_steps, b.train.warmup_steps);
  return d.found;
}

}  // namespace

AbConditions compare_conditions(const Manifest& reference, const Manifest& run) {
  AbConditions conditions;
  if (const auto differences = condition_differences(reference, run); !differences.empty())
    conditions.not_comparable = differences.front();
  conditions.optimizer_changes = optimizer_differences(reference, run);
  // A validation loss is a mean over eval_batches windows: another count, another mean.
  Differences val;
  val.check("train.eval_batches", reference.train.eval_batches, run.train.eval_batches);
  if (!val.found.empty()) conditions.val_not_comparable = val.found.front();
  return conditions;
}

}  // namespace strata
