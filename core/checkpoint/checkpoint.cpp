#include "core/checkpoint/checkpoint.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/checkpoint/safetensors.hpp"
#include "core/util/atomic_file.hpp"

namespace strata {

namespace {

namespace fs = std::filesystem;

// Checkpoints store exactly `vocab` rows of wte; the padded rows exist only in memory.
std::vector<std::int64_t> stored_shape(const GPT2Model& model, const ParameterRows& rows) {
  std::vector<std::int64_t> shape = model.table().row(rows.param).shape;
  if (rows.name == "wte.weight") shape[0] = model.config().vocab;
  return shape;
}

std::size_t stored_elements(const std::vector<std::int64_t>& shape) {
  std::size_t count = 1;
  for (std::int64_t extent : shape) count *= static_cast<std::size_t>(extent);
  return count;
}

nlohmann::json model_json(const GPT2Config& config) {
  return {{"n_layer", config.n_layer},
          {"n_head", config.n_head},
          {"d_model", config.d_model},
          {"vocab", config.vocab},
          {"seq_len", config.seq_len}};
}

void copy_into(std::span<float> destination, const std::vector<float>& values) {
  std::copy(values.begin(), values.end(), destination.begin());
}

}  // namespace

fs::path resolve_checkpoint(const fs::path& path) {
  if (fs::is_regular_file(path / "latest")) {
    std::ifstream in(path / "latest");
    std::string name;
    std::getline(in, name);
    if (name.empty()) throw CheckpointError((path / "latest").string() + ": empty");
    return path / name;
  }
  if (fs::is_regular_file(path / "trainer.json") || fs::is_regular_file(path / "model.safetensors")) return path;
  throw CheckpointError(path.string() +
                        ": not a checkpoint directory (no 'latest', trainer.json or model.safetensors)");
}

fs::path save_checkpoint(const fs::path& directory, GPT2Model& model, const TrainerState& state) {
  fs::create_directories(directory);
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(state.step));
  const fs::path final_path = directory / name;
  const fs::path temporary = directory / (std::string(".") + name + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(temporary);
  fs::create_directories(temporary);

  std::vector<TensorToWrite> weights;
  std::vector<TensorToWrite> optimizer_state;
  for (const ParameterRows& rows : model.parameters()) {
    const std::vector<std::int64_t> shape = stored_shape(model, rows);
    const std::size_t count = stored_elements(shape);
    weights.push_back({rows.name, shape, model.values(rows).first(count)});  // f32: the master copy under bf16
    for (std::size_t s = 0; s < rows.state.size(); ++s)
      if (rows.state[s] >= 0)
        optimizer_state.push_back(
            {rows.name + ".state" + std::to_string(s), shape, model.data(rows.state[s]).first(count)});
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"producer", "strata"}};
  write_file_atomically(temporary / "model.safetensors", encode_safetensors(weights, metadata));
  write_file_atomically(temporary / "optimizer.safetensors",
                        encode_safetensors(optimizer_state, {{"producer", "strata"}}));
  const nlohmann::json trainer = {
      {"format", "strata-checkpoint-1"},
      {"step", state.step},
      {"seed", state.seed},
      {"optimizer", state.optimizer},
      {"optimizer_state_buffers", optimizer_state.size() / std::max<std::size_t>(1, weights.size())},
      {"data_order", "counter-hash(seed, step, micro_batch, row)"},
      {"model", model_json(model.config())}};
  write_file_atomically(temporary / "trainer.json", trainer.dump(2) + "\n");

  // Swap the finished directory into place; an older save of the same step goes only afterwards.
  const fs::path previous = directory / (std::string(".") + name + ".old-" + std::to_string(::getpid()));
  if (fs::exists(final_path)) fs::rename(final_path, previous);
  fs::rename(temporary, final_path);
  sync_directory(directory);
  fs::remove_all(previous);
  write_file_atomically(directory / "latest", std::string(name) + "\n");
  return final_path;
}

void load_weights(const fs::path& path, GPT2Model& model) {
  fs::path file = path;
  if (fs::is_directory(path)) file = resolve_checkpoint(path) / "model.safetensors";
  const SafetensorsFile weights = SafetensorsFile::read(file);
  for (const ParameterRows& rows : model.parameters()) {
    std::string name = rows.name;
    if (!weights.has(name) && weights.has("transformer." + name)) name = "transformer." + name;
    const std::vector<std::int64_t> shape = stored_shape(model, rows);
    copy_into(model.values(rows), weights.tensor(name, shape));
  }
  model.publish_weights();
}

TrainerState load_checkpoint(const fs::path& path, GPT2Model& model) {
  const fs::path directory = resolve_checkpoint(path);
  const fs::path trainer_path = directory / "trainer.json";
  std::ifstream in(trainer_path);
  if (!in) throw CheckpointError(trainer_path.string() + ": missing");
  nlohmann::json trainer;
  TrainerState state;
  try {
    trainer = nlohmann::json::parse(in);
    state.step = trainer.at("step").get<std::int64_t>();
    state.seed = trainer.at("seed").get<std::uint64_t>();
    state.optimizer = trainer.at("optimizer").get<std::string>();
    if (trainer.at("model") != model_json(model.config()))
      throw CheckpointError(trainer_path.string() + ": saved for model " + trainer.at("model").dump() +
                            ", but the manifest describes " + model_json(model.config()).dump());
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(trainer_path.string() + ": corrupt: " + e.what());
  }
  load_weights(directory / "model.safetensors", model);
  const SafetensorsFile optimizer_state = SafetensorsFile::read(directory / "optimizer.safetensors");
  for (const ParameterRows& rows : model.parameters())
    for (std::size_t s = 0; s < rows.state.size(); ++s)
      if (rows.state[s] >= 0) {
        const std::string name = rows.name + ".state" + std::to_string(s);
        if (!optimizer_state.has(name))
          throw CheckpointError((directory / "optimizer.safetensors").string() + ": missing '" + name +
                                "' (was the checkpoint saved with optimizer '" + state.optimizer + "'?)");
        copy_into(model.data(rows.state[s]), optimizer_state.tensor(name, stored_shape(model, rows)));
      }
  return state;
}

}  // namespace strata
