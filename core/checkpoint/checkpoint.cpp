#include "core/checkpoint/checkpoint.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/checkpoint/checkpoint_verify.hpp"
#include "core/checkpoint/hf_directory.hpp"
#include "core/checkpoint/safetensors.hpp"
#include "core/model/model_family.hpp"
#include "core/util/atomic_file.hpp"
#include "core/util/format_bytes.hpp"

namespace strata {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMaxCheckpointStep = std::int64_t{1} << 48;

std::size_t stored_elements(const std::vector<std::int64_t>& shape) {
  std::size_t count = 1;
  for (std::int64_t extent : shape) count *= static_cast<std::size_t>(extent);
  return count;
}

std::string state_name(const ParameterRows& rows, std::size_t buffer) {
  return rows.name + ".state" + std::to_string(buffer);
}

// An f32 state buffer of the parameter's length is saved in the parameter's stored shape (as its
// weight, without padding rows); any other buffer (an 8-bit optimizer's codes, whose blocks may span
// the padding, and its block scales) whole, in the row's shape.
std::vector<std::int64_t> state_file_shape(const Model& model, const ParameterRows& rows, std::size_t buffer) {
  const TensorRow& row = model.table().row(rows.state[buffer]);
  if (row.element == DType::f32 && row.shape == model.table().row(rows.param).shape) return model.stored_shape(rows);
  return row.shape;
}

// `first`: the index of values[0] in the tensor, when they are a slice of it.
void require_finite(const std::vector<float>& values, const fs::path& file, const std::string& name,
                    std::size_t first = 0) {
  const auto bad = std::find_if(values.begin(), values.end(), [](float value) { return !std::isfinite(value); });
  if (bad != values.end())
    throw CheckpointError(file.string() + ": corrupt checkpoint: tensor '" + name + "' holds " + std::to_string(*bad) +
                          " at element " + std::to_string(first + static_cast<std::size_t>(bad - values.begin())));
}

// Elements converted to f32 at a time when a parameter takes slices: 16 MiB of f32, so a large
// matrix (an embedding) never exists whole in f32 beside its stored form.
constexpr std::size_t kLoadSliceElements = std::size_t{4} << 20;

// Metadata of a save that left its frozen parameters out (Model::frozen_fingerprint) and of one
// with adapters (Model::adapter_description).
constexpr const char* kFrozenKey = "strata_frozen_parameters";
constexpr const char* kAdaptersKey = "strata_adapters";

// Which family a safetensors file holds, by a tensor only that family has.
// The tensors weights load from: one safetensors file (a model file or a save), or the files of a
// Hugging Face model directory, each tensor read from the file that holds it.
class TensorSource {
 public:
  // A save's model.safetensors (or optimizer.safetensors) with the tensors it keeps in tier/ (tier_tensors).
  explicit TensorSource(const SafetensorsFile& file, const std::vector<SafetensorsFile>& linked = {})
      : path_(file.path()), metadata_(file.metadata()) {
    for (const auto& [name, entry] : file.entries()) tensors_.emplace(name, &file);
    for (const SafetensorsFile& raw : linked)
      for (const auto& [name, entry] : raw.entries())
        if (!tensors_.emplace(name, &raw).second)
          throw CheckpointError(raw.path().string() + ": corrupt checkpoint: tensor '" + name + "' is also in " +
                                path_.string());
  }
  TensorSource(const HfWeights& weights, fs::path directory) : path_(std::move(directory)), tensors_(weights.tensors) {}

  const fs::path& path() const noexcept { return path_; }  // the file, or the directory
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  const std::map<std::string, const SafetensorsFile*>& tensors() const noexcept { return tensors_; }
  bool has(const std::string& name) const { return tensors_.contains(name); }
  const fs::path& file_of(const std::string& name) const { return holder(name).path(); }
  // As f32; a mapped file's pages of it are released once read, so a directory loads with one
  // tensor's pages resident at a time.
  std::vector<float> tensor(const std::string& name, const std::vector<std::int64_t>& shape) const {
    std::vector<float> values = holder(name).tensor(name, shape);
    holder(name).release(name);
    return values;
  }
  // Elements [first, first + count) of it as f32, their pages released once read.
  std::vector<float> tensor_slice(const std::string& name, const std::vector<std::int64_t>& shape, std::size_t first,
                                  std::size_t count) const {
    std::vector<float> values = holder(name).tensor_slice(name, shape, first, count);
    holder(name).release_slice(name, first, count);
    return values;
  }
  // The file that holds `name`; a missing tensor is a CheckpointError naming the source.
  const SafetensorsFile& holder(const std::string& name) const {
    const auto found = tensors_.find(name);
    if (found == tensors_.end()) throw CheckpointError(path_.string() + ": missing tensor '" + name + "'");
    return *found->second;
  }
  // Whether two tensors hold the same dtype, shape and bytes.
  bool same_values(const std::string& a, const std::string& b) const {
    const SafetensorsFile::Entry& x = tensors_.at(a)->entry(a);
    const SafetensorsFile::Entry& y = tensors_.at(b)->entry(b);
    if (x.dtype != y.dtype || x.shape != y.shape) return false;
    const auto bytes_a = tensors_.at(a)->raw(a, x.dtype, x.shape), bytes_b = tensors_.at(b)->raw(b, y.dtype, y.shape);
    return bytes_a.size() == bytes_b.size() && std::memcmp(bytes_a.data(), bytes_b.data(), bytes_a.size()) == 0;
  }

 private:
  fs::path path_;
  std::map<std::string, std::string> metadata_;  // a Strata file's; a Hugging Face directory's hold none of use
  std::map<std::string, const SafetensorsFile*> tensors_;
};

// Removes a save's temporary directory unless the save completed (disarmed).
struct RemoveOnFailure {
  fs::path path;
  bool armed = true;
  ~RemoveOnFailure() {
    std::error_code error;
    if (armed) fs::remove_all(path, error);
  }
};

// Empty when `arch`'s model loads the file's tensor names (or no family knows them); else the
// first family in the registry's list that does.
std::string other_family_of(const TensorSource& source, std::string_view arch) {
  std::vector<std::string> names;
  names.reserve(source.tensors().size());
  for (const auto& [name, file] : source.tensors()) names.push_back(name);
  if (const ModelFamily* own = find_model_family(arch); own != nullptr && own->recognizes(names)) return {};
  for (const ModelFamily* family : model_families())
    if (family->recognizes(names)) return std::string(family->arch());
  return {};
}

}  // namespace

bool initialise_before(Model& model, std::uint64_t seed, const std::optional<fs::path>& base) {
  const bool whole = base && is_hf_directory(*base);
  if (whole)
    model.init_adapters(seed);
  else
    model.init_weights(seed);
  return whole;
}

fs::path resolve_checkpoint(const fs::path& path) {
  // The `latest` file itself, named as the checkpoint, means what its directory means.
  if (path.filename() == "latest" && fs::is_regular_file(path)) return resolve_checkpoint(path.parent_path());
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

std::string strategy_state_key(std::size_t index, const std::string& plugin) {
  return "strategy_" + std::to_string(index + 1) + "_" + plugin;
}

fs::path save_checkpoint(const fs::path& directory, Model& model, const TrainerState& state,
                         const RowBytes& row_bytes) {
  fs::create_directories(directory);
  const auto start = std::chrono::steady_clock::now();
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(state.step));
  const fs::path final_path = directory / name;
  const fs::path temporary = directory / (std::string(".") + name + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(temporary);
  fs::create_directories(temporary);
  RemoveOnFailure cleanup{temporary};  // a save that fails part-way leaves nothing (its links would hold rows)

  // Every value reaches the host through an explicit copy, a piece at a time as the files are
  // written (safetensors.hpp, write_safetensors_in_pieces): a save holds at most one piece of
  // tensor data beside the model, and one row read in from the disk tier.
  std::optional<Residency::Loan> loan;  // the row being read, when the disk tier holds it
  int loaned_row = -1;
  const auto row_source = [&model, &loan, &loaned_row, &row_bytes](int row) {
    return [&model, &loan, &loaned_row, &row_bytes, row](std::uint64_t offset, std::span<std::byte> out) {
      if (row != loaned_row) {  // a row on disk is read in for the copy, and dropped again
        loan.reset();
        loan.emplace(model.store().residency(), std::vector<int>{row}, Residency::Loan::Access::read);
        loaned_row = row;
      }
      const void* data = row_bytes ? row_bytes(row) : model.store().data(row);
      model.backend().ops().copy_to_host(out.data(), static_cast<const std::byte*>(data) + offset, out.size());
    };
  };
  std::vector<TensorPieces> weights;
  std::vector<TensorPieces> optimizer_state;
  // Rows whose only copy is in the disk tier are kept by hard link in tier/ (the tier's next write
  // to such a row starts a new file), not copied into the safetensors files: a save of a large run
  // costs its in-memory rows only. Where the tier cannot link (another filesystem), they are copied.
  nlohmann::json tier_files = nlohmann::json::object();
  std::uint64_t linked_bytes = 0;
  DiskTier* tier = model.store().residency().disk_tier();
  bool linking = tier != nullptr && tier->link_refusal().empty();  // a refusal is logged once a run
  const auto link_or_copy = [&](std::vector<TensorPieces>& file_tensors, const char* file, int row,
                                const std::string& name, const std::vector<std::int64_t>& shape, DType dtype) {
    const std::uint64_t bytes = storage_bytes(dtype, static_cast<std::int64_t>(stored_elements(shape)));
    if (linking && model.table().row(row).home == Home::disk) {
      fs::create_directories(temporary / kTierDirectory);
      const std::string link_name = std::string(kTierDirectory) + "/" + name + ".bin";
      std::string why;
      if (const auto linked = model.store().residency().link_from_disk(row, temporary / link_name, why)) {
        // What the read-back would have found in a copy: values that are not finite.
        if (!linked->finite)
          throw std::runtime_error("the save of step " + std::to_string(state.step) +
                                   " was discarded and the earlier saves kept: tensor '" + name +
                                   "' (in the disk tier) holds a value that is not finite");
        tier_files[name] = {{"file", link_name},
                            {"in", file},
                            {"dtype", safetensors_dtype(dtype)},
                            {"shape", shape},
                            {"bytes", linked->bytes},
                            {"checksum", checksum_text(linked->checksum)}};
        linked_bytes += linked->bytes;
        return;
      }
      linking = false;
      spdlog::warn("checkpoint: the disk tier's rows cannot be kept by hard link in {}: {}; the save copies them",
                   directory.string(), why);
    }
    file_tensors.push_back({name, shape, safetensors_dtype(dtype), bytes, row_source(row)});
  };
  std::size_t trained = 0, state_buffers = 0;
  for (const ParameterRows& rows : model.parameters()) {
    // A frozen parameter is as initialised or loaded from the run's base (train.init_from): the
    // save records its fingerprint instead, and a load checks it against the model's.
    if (rows.role == ParameterRole::frozen) continue;
    ++trained;
    // f32: the master copy under bf16 or quantized storage.
    link_or_copy(weights, "model.safetensors", model.store().value_row(rows), rows.name, model.stored_shape(rows),
                 DType::f32);
    // Optimizer state in its own dtype and shape, byte for byte (a resume is bitwise).
    for (std::size_t s = 0; s < rows.state.size(); ++s)
      if (rows.state[s] >= 0) {
        ++state_buffers;
        link_or_copy(optimizer_state, "optimizer.safetensors", rows.state[s], state_name(rows, s),
                     state_file_shape(model, rows, s), model.table().row(rows.state[s]).element);
      }
  }
  if (tier_files.empty())
    fs::remove(temporary / kTierDirectory);  // a first link that failed left it empty
  else
    sync_directory(temporary / kTierDirectory);  // the links survive a crash once `latest` names the save
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"producer", "strata"}};
  if (std::string fingerprint = model.frozen_fingerprint(); !fingerprint.empty())
    metadata[kFrozenKey] = std::move(fingerprint);
  if (std::string adapters = model.adapter_description(); !adapters.empty())
    metadata[kAdaptersKey] = std::move(adapters);
  nlohmann::json files = nlohmann::json::object();  // each file of the save and its checksum
  for (const auto& [file, tensors, file_metadata] :
       {std::tuple{"model.safetensors", &weights, metadata},
        std::tuple{"optimizer.safetensors", &optimizer_state,
                   std::map<std::string, std::string>{{"producer", "strata"}}}})
    files[file] = write_safetensors_in_pieces(temporary / file, *tensors, file_metadata);
  loan.reset();
  nlohmann::json trainer = {
      {"format", tier_files.empty() ? kCheckpointFormat : kTierCheckpointFormat},
      {"step", state.step},
      {"seed", state.seed},
      {"optimizer", state.optimizer},
      {"stack", state.stack},
      {"data", state.data},
      {"data_fingerprint", state.data_fingerprint},
      {"loss", state.loss && std::isfinite(*state.loss) ? nlohmann::json(*state.loss) : nlohmann::json()},
      {"precision_state", state.precision},
      {"optimizer_state_buffers", state_buffers / std::max<std::size_t>(1, trained)},
      {"data_order", "counter-hash(seed, step, micro_batch, row)"},
      {"model", model.config_json()}};
  if (state.fused_clip_norm) trainer["fused_clip_norm"] = *state.fused_clip_norm;
  if (!tier_files.empty()) trainer["tier_files"] = std::move(tier_files);
  std::map<std::string, std::string> side_files;
  if (!state.predictor.empty()) side_files["predictor.bin"] = state.predictor;
  for (const auto& [key, bytes] : state.strategies) side_files[key + ".bin"] = bytes;
  for (const auto& [file, bytes] : side_files) {
    write_file_atomically(temporary / file, bytes);
    files[file] = bytes_checksum(bytes);
  }
  trainer["files"] = std::move(files);
  write_file_atomically(temporary / "trainer.json", trainer.dump(2) + "\n");

  // Read back before trusting: a save that does not verify never becomes `latest`, and no older
  // save is pruned in its favour.
  try {
    verify_save(temporary, /*mapped=*/true);  // this run's own files, under the directory's lock
  } catch (const std::exception& e) {
    std::error_code error;
    fs::remove_all(temporary, error);
    std::string fault = e.what();  // named as the save it would have been, not its temporary
    if (const std::size_t at = fault.find(temporary.string()); at != std::string::npos)
      fault.replace(at, temporary.string().size(), final_path.string());
    throw std::runtime_error("the save of step " + std::to_string(state.step) +
                             " failed its read-back check, so it was discarded and the earlier saves kept: " + fault);
  }

  // Swap the finished directory into place; an older save of the same step goes only afterwards.
  const fs::path previous = directory / (std::string(".") + name + ".old-" + std::to_string(::getpid()));
  if (fs::exists(final_path)) fs::rename(final_path, previous);
  fs::rename(temporary, final_path);
  cleanup.armed = false;
  sync_directory(directory);
  fs::remove_all(previous);
  write_file_atomically(directory / "latest", std::string(name) + "\n");
  std::uint64_t written = 0;
  for (const auto& entry : fs::directory_iterator(final_path))
    if (entry.is_regular_file()) written += entry.file_size();
  spdlog::info(
      "checkpoint: step {} saved to {} in {:.1f} s: {} written{}", state.step, final_path.string(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), format_bytes(written),
      linked_bytes > 0 ? ", " + format_bytes(linked_bytes) + " of disk-tier rows kept by hard link" : std::string());
  return final_path;
}

namespace {

// A family without a tie_embeddings key (GPT-2) ties its head by its definition.
bool ties_by_definition(std::string_view arch) {
  const ModelFamily* family = find_model_family(arch);
  if (family == nullptr) return false;
  const std::vector<std::string_view> keys = family->extra_keys();
  return std::find(keys.begin(), keys.end(), "tie_embeddings") == keys.end();
}

// A tied model's head is its embedding: a file that also holds lm_head.weight (some GPT-2 files
// do, as a copy) must hold the embedding's values there, or its own head would go unused unseen.
void require_tied_head_is_the_embedding(const TensorSource& weights, const Model& model) {
  if (!weights.has("lm_head.weight") || !model.ignorable_file_tensor("lm_head.weight")) return;
  for (const char* embedding : {"model.embed_tokens.weight", "wte.weight", "transformer.wte.weight"})
    if (weights.has(embedding)) {
      if (!weights.same_values("lm_head.weight", embedding))
        throw CheckpointError(weights.file_of("lm_head.weight").string() + ": holds an lm_head.weight unlike its " +
                              embedding + ", but this model ties its head to the embeddings (" +
                              (ties_by_definition(model.arch())
                                   ? "arch = \"" + std::string(model.arch()) + "\" always does"
                                   : std::string("tie_embeddings = true")) +
                              "), so the file's head would be ignored; set tie_embeddings = false, or use a file "
                              "whose head is its embedding");
      return;
    }
}

void load_weights_from(const TensorSource& weights, Model& model) {
  const fs::path& file = weights.path();
  if (const std::string family = other_family_of(weights, model.arch()); !family.empty())
    throw CheckpointError(file.string() + ": holds a " + family + " checkpoint, but the manifest's model is arch = \"" +
                          std::string(model.arch()) + "\"");
  if (const auto adapters = weights.metadata().find(kAdaptersKey); adapters != weights.metadata().end())
    if (const std::string mine = model.adapter_description(); mine != adapters->second)
      throw CheckpointError(file.string() + ": saved with adapters '" + adapters->second +
                            "', but the manifest makes '" + (mine.empty() ? std::string("none") : mine) +
                            "' (targets, rank and alpha must be the run's)");
  std::set<std::string> known;
  for (const ParameterRows& rows : model.parameters())
    for (const std::string& name : model.file_names(rows)) known.insert(name);
  for (const auto& [name, holder] : weights.tensors())
    if (!known.contains(name) && !model.ignorable_file_tensor(name))
      throw CheckpointError(holder->path().string() + ": tensor '" + name + "' is not a parameter of this " +
                            std::string(model.arch()) +
                            " model (is the manifest's [model] the one it was saved with?)");
  require_tied_head_is_the_embedding(weights, model);
  // A file saved with frozen parameters left out (a sparse or adapter run) names their fingerprint;
  // one with adapters, what they are.
  const auto frozen = weights.metadata().find(kFrozenKey);
  const bool from_a_run = frozen != weights.metadata().end();
  for (const ParameterRows& rows : model.parameters()) {
    const std::vector<std::string> names = model.file_names(rows);
    std::string name = names.front();
    bool present = false;
    for (const std::string& candidate : names)
      if (weights.has(candidate)) {
        name = candidate;
        present = true;
        break;
      }
    // An adapter's tensors are not in a base model's file: they keep their initial values.
    if (!present && rows.role == ParameterRole::adapter && !from_a_run) continue;
    if (!present && rows.role == ParameterRole::frozen && from_a_run) continue;
    if (!present && from_a_run)
      throw CheckpointError(file.string() + ": has no tensor '" + name +
                            "': a run that froze parameters saved it, leaving them out, so it loads only with the "
                            "manifest it was trained with (`strata export --merge` writes a complete file)");
    // A NaN or infinite weight is a corrupt checkpoint; found here, it would otherwise surface
    // as a NaN loss (eval) or steps later as "divergence" (resume).
    const std::vector<std::int64_t> shape = model.stored_shape(rows);
    if (model.writes_value_slices(rows)) {
      std::size_t elements = 1;
      for (std::int64_t extent : shape) elements *= static_cast<std::size_t>(extent);
      for (std::size_t first = 0; first < elements; first += kLoadSliceElements) {
        const std::vector<float> values = weights.tensor_slice(name, shape, first, kLoadSliceElements);
        require_finite(values, weights.file_of(name), name, first);
        model.write_values(rows, values, first);
      }
    } else {
      const std::vector<float> values = weights.tensor(name, shape);
      require_finite(values, weights.file_of(name), name);
      model.write_values(rows, values);
    }
  }
  model.store().publish_weights();
  if (from_a_run)
    if (const std::string mine = model.frozen_fingerprint(); mine != frozen->second)
      throw CheckpointError(
          file.string() +
          ": its trained tensors belong to a different base: the frozen weights it was "
          "saved beside are '" +
          frozen->second + "', this run's are '" + (mine.empty() ? std::string("none frozen") : mine) +
          "' (they come from train.init_from, train.seed, [precision] and the strategies that freeze; "
          "use the run's own)");
}

}  // namespace

void load_weights(const fs::path& path, Model& model) {
  if (is_hf_directory(path)) {
    const HfWeights weights = open_hf_weights(path);
    load_weights_from(TensorSource(weights, path), model);
    return;
  }
  // A save's model.safetensors named alone still takes the weights it keeps in tier/.
  const bool save_file = !fs::is_directory(path) && path.filename() == "model.safetensors" &&
                         fs::is_regular_file(path.parent_path() / "trainer.json");
  const bool latest_file = !fs::is_directory(path) && path.filename() == "latest";  // resolve_checkpoint's
  if (!fs::is_directory(path) && !save_file && !latest_file) {
    load_weights_from(TensorSource(SafetensorsFile::read(path)), model);
    return;
  }
  const fs::path directory = save_file ? path.parent_path() : resolve_checkpoint(path);
  // A Strata save's trainer.json names its linked files; anything else beside the file is not ours.
  nlohmann::json trainer = nlohmann::json::object();
  if (fs::is_regular_file(directory / "trainer.json")) {
    nlohmann::json parsed = nlohmann::json::parse(read_save_file(directory / "trainer.json"), nullptr, false);
    if (parsed.is_object() && parsed.contains("format") && parsed["format"].is_string() &&
        parsed["format"].get<std::string>().starts_with("strata-checkpoint"))
      trainer = std::move(parsed);
  }
  const SafetensorsFile weights = SafetensorsFile::read(directory / "model.safetensors");
  load_weights_from(TensorSource(weights, tier_tensors(directory, trainer, "model.safetensors", true)), model);
}

TrainerState load_checkpoint(const fs::path& path, Model& model, const std::string& optimizer,
                             const Optimizer* checker) {
  const fs::path directory = resolve_checkpoint(path);
  const fs::path trainer_path = directory / "trainer.json";
  std::ifstream in(trainer_path);
  if (!in) throw CheckpointError(trainer_path.string() + ": missing");
  nlohmann::json trainer;
  TrainerState state;
  try {
    trainer = nlohmann::json::parse(in);
    // A save follows a step: its step is a whole number from 1 on. Steps are counted in int64 and
    // added to; a value near its limit is corruption, not progress.
    if (!trainer.at("step").is_number_integer())
      throw CheckpointError(trainer_path.string() + ": step " + trainer.at("step").dump() + " is not a whole number");
    state.step = trainer.at("step").get<std::int64_t>();
    if (state.step < 1 || state.step > kMaxCheckpointStep)
      throw CheckpointError(trainer_path.string() + ": step " + std::to_string(state.step) + " is outside [1, " +
                            std::to_string(kMaxCheckpointStep) + "] (a checkpoint is saved after a step)");
    state.seed = trainer.at("seed").get<std::uint64_t>();
    state.optimizer = trainer.at("optimizer").get<std::string>();
    state.stack = trainer.value("stack", std::string());
    state.data = trainer.value("data", std::string());
    state.data_fingerprint = trainer.value("data_fingerprint", std::string());
    state.precision = trainer.value("precision_state", std::string());
    if (trainer.contains("fused_clip_norm")) {
      const nlohmann::json& norm = trainer.at("fused_clip_norm");
      if (!norm.is_number() || !std::isfinite(norm.get<double>()) || norm.get<double>() < 0.0)
        throw CheckpointError(trainer_path.string() + ": corrupt: fused_clip_norm " + norm.dump() +
                              " is not a gradient norm");
      state.fused_clip_norm = norm.get<double>();
    }
    if (trainer.at("model") != model.config_json())
      throw CheckpointError(trainer_path.string() + ": saved for model " + trainer.at("model").dump() +
                            ", but the manifest describes " + model.config_json().dump());
    // What save_checkpoint writes: state tensors per trained parameter, which the optimizer's layout fixes.
    if (trainer.contains("optimizer_state_buffers") && (optimizer.empty() || state.optimizer == optimizer)) {
      std::size_t trained = 0, buffers = 0;
      for (const ParameterRows& rows : model.parameters())
        if (rows.role != ParameterRole::frozen) {
          ++trained;
          buffers += static_cast<std::size_t>(
              std::count_if(rows.state.begin(), rows.state.end(), [](int row) { return row >= 0; }));
        }
      const nlohmann::json& recorded = trainer.at("optimizer_state_buffers");
      const std::size_t expected = buffers / std::max<std::size_t>(1, trained);
      if (!recorded.is_number_unsigned() || recorded.get<std::size_t>() != expected)
        throw CheckpointError(trainer_path.string() + ": corrupt: optimizer_state_buffers " + recorded.dump() +
                              ", but optimizer '" + state.optimizer + "' keeps " + std::to_string(expected) +
                              " per parameter");
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(trainer_path.string() + ": corrupt: " + e.what());
  }
  if (!optimizer.empty() && state.optimizer != optimizer)
    throw CheckpointError(path.string() + ": saved with optimizer '" + state.optimizer + "', but the manifest uses '" +
                          optimizer + "' (optimizer state does not carry over between optimizers)");
  if (const fs::path predictor_path = directory / "predictor.bin"; fs::is_regular_file(predictor_path))
    state.predictor = read_save_file(predictor_path);
  for (const fs::directory_entry& entry : fs::directory_iterator(directory))
    if (entry.is_regular_file() && entry.path().extension() == ".bin" &&
        entry.path().stem().string().starts_with("strategy_"))
      state.strategies[entry.path().stem().string()] = read_save_file(entry.path());
  std::map<std::string, std::string> read_checksums;  // whole-file checksums of the files read below
  const SafetensorsFile weights =
      SafetensorsFile::read(directory / "model.safetensors", &read_checksums["model.safetensors"]);
  // A run that freezes parameters saves only what trains; a file with every weight (a base model,
  // a merged export) copied into its save would load over the frozen base and train from there.
  if (!model.frozen_fingerprint().empty() && !weights.metadata().contains(kFrozenKey))
    throw CheckpointError(weights.path().string() +
                          ": holds a whole model (no record of frozen weights), but this run freezes parameters "
                          "and saves only what trains: it is not this run's save (a base model is train.init_from)");
  // Weights the save kept in the disk tier's files (tier/), each read against its checksum.
  load_weights_from(TensorSource(weights, tier_tensors(directory, trainer, "model.safetensors", true)), model);
  // The stored weights as the uninterrupted run had them after this step (a precision policy's own
  // rounding may depend on it).
  model.store().publish_weights(state.step);
  const fs::path optimizer_path = directory / "optimizer.safetensors";
  const SafetensorsFile optimizer_state =
      SafetensorsFile::read(optimizer_path, &read_checksums["optimizer.safetensors"]);
  const std::vector<SafetensorsFile> linked_state = tier_tensors(directory, trainer, "optimizer.safetensors", true);
  const TensorSource state_files(optimizer_state, linked_state);  // where each state tensor is
  for (const ParameterRows& rows : model.parameters()) {
    std::vector<SavedStateBuffer> buffers(rows.state.size());
    // f32 buffers copied out: the file packs tensors without padding, so after an 8-bit optimizer's
    // codes an f32 tensor may sit at an address no float may be read from.
    std::vector<std::vector<float>> aligned(rows.state.size());
    bool has_state = false;
    for (std::size_t s = 0; s < rows.state.size(); ++s) {
      if (rows.state[s] < 0) continue;
      has_state = true;
      const std::string name = state_name(rows, s);
      if (!state_files.has(name))
        throw CheckpointError(optimizer_path.string() + ": missing '" + name +
                              "' (was the checkpoint saved with optimizer '" + state.optimizer + "'?)");
      const SafetensorsFile& holder = state_files.holder(name);
      const DType dtype = model.table().row(rows.state[s]).element;
      buffers[s] = {dtype, holder.raw(name, safetensors_dtype(dtype), state_file_shape(model, rows, s))};
      if (dtype == DType::f32) {
        aligned[s].resize(buffers[s].bytes.size() / sizeof(float));
        std::memcpy(aligned[s].data(), buffers[s].bytes.data(), buffers[s].bytes.size());
        require_finite(aligned[s], holder.path(), name);
        buffers[s].bytes = std::as_bytes(std::span(aligned[s]));
      }
    }
    // The optimizer's own invariants (AdamW: second moments are not negative), before any is used.
    if (checker != nullptr && has_state)
      if (Status status = checker->check_state(rows.name, buffers); !status)
        throw CheckpointError(optimizer_path.string() + ": corrupt checkpoint: optimizer '" + state.optimizer +
                              "' refuses its state: " + status.message());
    std::vector<int> state_rows(rows.state.begin(), rows.state.end());
    std::erase(state_rows, -1);
    const Residency::Loan state(model.store().residency(), state_rows,
                                Residency::Loan::Access::write);  // the disk tier's, if there
    for (std::size_t s = 0; s < rows.state.size(); ++s)
      if (const int row = rows.state[s]; row >= 0) {
        // Another data-parallel rank's (it keeps and loads the row itself): checked above, not held here.
        if (model.store().residency().held_elsewhere(row)) continue;
        model.backend().ops().copy_from_host(model.store().data(row), buffers[s].bytes.data(), buffers[s].bytes.size());
        state_files.holder(state_name(rows, s)).release(state_name(rows, s));  // a mapped tier file's pages
      }
  }
  // Every file of the save against the checksums trainer.json records (format 2): after the
  // files' own checks (which name a tensor), before the run uses anything loaded.
  check_save_files(directory, trainer, read_checksums);
  return state;
}

}  // namespace strata
