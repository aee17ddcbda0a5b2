#pragma once
// The manifest: one TOML file that composes a run (docs/architecture.md, "The manifest"). Core's
// tables are read here, strictly; each plugin table is kept as TOML and read by its plugin through
// a TomlConfigView when the stack is built.
#include <toml++/toml.h>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/manifest/update_mode.hpp"
#include "core/model/model_spec.hpp"

namespace strata {

struct PluginSpec {
  std::string plugin;                  // the factory name
  const toml::table* table = nullptr;  // the whole table, `plugin` key included (owned by the Manifest)
  std::string label;                   // "[optimizer]", "[[strategy]] #1"
  std::string dotted_path;             // "optimizer", "strategy.0"
};

struct TrainSpec {
  std::int64_t steps = 100;
  int batch = 8;
  int micro_batches = 1;
  int micro_batch_rows() const noexcept { return batch / micro_batches; }  // validated: divides
  double lr = 3e-4;
  std::int64_t warmup_steps = 0;
  std::uint64_t seed = 42;
  std::int64_t eval_every = 0;        // 0: evaluate once, at the end
  std::int64_t eval_batches = 8;      // 0: every validation window
  int threads = 0;                    // 0: all cores
  double divergence_factor = 100.0;   // stop when the loss stays this far above its best; 0: never
  std::int64_t divergence_steps = 8;  // ... for this many steps in a row (also non-finite steps)
  // A greedy continuation of sample_prompt printed every sample_every steps (0: never);
  // core/training/training_sample.hpp.
  std::int64_t sample_every = 0;
  std::int64_t sample_tokens = 32;
  std::string sample_prompt;  // empty: bos or eos, else the validation split's first tokens
  // Fine-tuning: the weights to start from (a checkpoint directory or a safetensors file, weights
  // only: the optimizer starts fresh) instead of a random initialisation; unset: random.
  std::optional<std::filesystem::path> init_from;
  UpdateMode update = UpdateMode::full;
  FusedClip fused_clip = FusedClip::previous;  // fused only: the last step's global norm, or each block's own
};

struct DataSpec {
  std::filesystem::path train;
  std::optional<std::filesystem::path> val;
  double val_fraction = 0.1;
  // A directory with tokenizer.json or tokenizer.model: [data] tokenizer, else [model] from when
  // that directory has one.
  std::optional<std::filesystem::path> tokenizer;
};

struct DeviceSpec {
  std::string kind = "cpu";
  std::uint64_t memory_limit = 0;  // 0: none
  bool tf32 = false;               // f32 products on TF32 tensor cores (a GPU only)
  // The disk tier (core/residency/disk_tier.hpp): the directory of its file, and how much it may hold.
  std::optional<std::filesystem::path> disk_path;
  std::uint64_t disk_limit = 0;  // 0: none
};

struct CheckpointSpec {
  std::optional<std::filesystem::path> dir;
  std::int64_t every = 0;      // 0: only when training ends
  std::int64_t keep_last = 0;  // keep the newest N saves; 0: keep all
};

// [distributed]: data parallel over the ranks mpirun starts (docs/architecture.md, "Data parallel").
struct DistributedSpec {
  bool present = false;  // the table is in the manifest
  int zero = 0;          // ZeRO stage: 0 all-reduce, 1 optimizer state sharded, 2 gradients too, 3 weights too
  // The calls to the other ranks overlap computing (a block's sums, zero 3's next block's weights);
  // false waits for each, and zero 2 and 3 then hold one block's gradients or weights fewer.
  bool overlap = true;
};

class Manifest {
 public:
  std::filesystem::path path;
  ModelSpec model;  // [model]: arch and shape
  DataSpec data;
  TrainSpec train;
  DeviceSpec device;
  CheckpointSpec checkpoint;
  DistributedSpec distributed;
  PluginSpec optimizer;
  PluginSpec precision;
  std::vector<PluginSpec> strategies;
  PluginSpec predictor;  // [predictor]: a phase controller; plugin empty when there is none
  std::vector<PluginSpec> telemetry;
  std::map<std::string, std::string> kernels;  // op -> implementation
  // [kernels.attention]: the attention kernel as a table of its own keys (plugin = "...", then the
  // kernel's); plugin empty when [kernels] attention is a name or absent.
  PluginSpec attention_kernel;
  std::vector<std::filesystem::path> plugin_path;
  std::set<std::string> overridden;  // dotted keys set with --set

  // The parsed document; PluginSpec tables point into it.
  std::shared_ptr<toml::table> document;

  // Where a run's starting weights come from: [model] from (a Hugging Face model directory) or
  // train.init_from (a Strata checkpoint or safetensors file), never both; none: from the seed.
  std::optional<std::filesystem::path> starting_weights() const { return model.from ? model.from : train.init_from; }
};

// What the manifest is read for: a run that reads data (training, evaluation), or generation,
// which needs the model and its weights but no [data] train.
enum class ManifestUse : std::uint8_t { training, generation };

// Parses and validates core tables; plugin tables are checked when the stack is built.
// `overrides` are "key.path=value" strings from --set. Throws ManifestError.
Manifest load_manifest(const std::filesystem::path& path, const std::vector<std::string>& overrides = {},
                       ManifestUse use = ManifestUse::training);

// The same from the manifest's text: `path` becomes Manifest::path and names the file in messages,
// but nothing is read from it. load_manifest reads the file and calls this; so does the fuzz target.
Manifest parse_manifest(std::string_view text, const std::filesystem::path& path,
                        const std::vector<std::string>& overrides = {});

// A manifest read as far as it goes, for `strata validate`, which lists every problem at once:
// the key problems, each faulty key left at its default, so the stack and the data can still be
// checked. Throws ManifestError only where nothing can be read on: no file, malformed TOML, a
// malformed --set. load_manifest is this, throwing when `problems` is not empty.
struct ManifestReading {
  Manifest manifest;
  std::vector<std::string> problems;
  // False when a [model] key was refused: the model's shape then holds a default the user never
  // wrote, and checks against it (a plugin's key against the matrices' sizes) would mislead.
  bool model_as_written = true;
};
ManifestReading read_manifest(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});

// Adds a [[telemetry]] table after the manifest's own (string-valued keys), as `strata train
// --metrics` does. With no [[telemetry]] in the manifest, it replaces the default console sink.
void append_telemetry(Manifest& manifest, const std::string& plugin, const std::map<std::string, std::string>& keys);

// The keys core accepts in each of its tables, for docs and tests.
const std::map<std::string, std::vector<std::string>>& core_manifest_keys();

}  // namespace strata
