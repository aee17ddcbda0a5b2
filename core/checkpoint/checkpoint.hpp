#pragma once
// Training checkpoints: a directory per save,
//   <dir>/step_00000100/model.safetensors      weights, the family's Hugging Face names and layouts
//   <dir>/step_00000100/optimizer.safetensors  optimizer state ("<param>.state0", ...)
//   <dir>/step_00000100/tier/<tensor>.bin      rows of the disk tier, kept by hard link (their tensors are
//                                              then not in the two files above; trainer.json's
//                                              "tier_files" gives each one's shape and checksum)
//   <dir>/step_00000100/trainer.json           format (strata-checkpoint-2, or -3 with tier/), step, seed, model
//                                              shape, optimizer, data and its fingerprint, the
//                                              step's loss, the precision policy's state, and
//                                              "files": every other file with its XXH3 checksum
//   <dir>/step_00000100/predictor.bin          the phase controller's state, when the run has one
//   <dir>/step_00000100/strategy_N_<plugin>.bin the state of the manifest's N-th strategy, when it has one
//   <dir>/latest                               the name of the newest complete save
// A save is built in a temporary directory, read back and verified (checkpoint_verify.hpp), renamed
// into place, then `latest` is replaced atomically: a crash mid-save leaves every earlier
// checkpoint intact, and a save that does not verify never becomes `latest`. A run whose strategies freeze
// parameters (sparse_layers, lora) saves only what trains: model.safetensors' metadata records the
// frozen weights' fingerprint and the adapters' description, which a load checks against the model.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "core/checkpoint/checkpoint_directory.hpp"
#include "core/model/model.hpp"
#include "strata/optimizer.hpp"

namespace strata {

struct TrainerState {
  std::int64_t step = 0;  // optimizer steps completed
  std::uint64_t seed = 0;
  std::string optimizer;  // plugin name
  // The run's identity beside the model shape: its plugin stack and its training data. Empty when
  // read from a checkpoint saved before they were recorded.
  std::string stack;
  std::string data;
  // The precision policy's state (PrecisionPolicy::state: a dynamic loss scale); empty when it has none.
  std::string precision;
  // The phase controller's state (PhaseController::state), bytes; empty without a [predictor].
  std::string predictor;
  // The strategies' states (MemoryStrategy::state), bytes, by strategy_state_key; only non-empty ones.
  std::map<std::string, std::string> strategies;
  // The training data's content (data_fingerprint()); empty in saves made before it was recorded.
  std::string data_fingerprint;
  // The step's training loss, which pruning compares (prune_checkpoints); none in older saves.
  std::optional<double> loss;
  // train.update = "fused" with fused_clip = "previous": the norm the next step clips by.
  std::optional<double> fused_clip_norm;
};

// "strategy_2_lora": the file stem of the state of the manifest's strategy `index` (0-based).
std::string strategy_state_key(std::size_t index, const std::string& plugin);

// Where the bytes of a model's row are, in its home's memory, for the save to copy to the host; a
// data-parallel rank 0 receives there a row another rank keeps (DataParallel::row_for_save).
using RowBytes = std::function<const void*(int row)>;

// Returns the directory written. Without `row_bytes`, every row is the model's own.
std::filesystem::path save_checkpoint(const std::filesystem::path& directory, Model& model, const TrainerState& state,
                                      const RowBytes& row_bytes = {});

// Weights only, from a model.safetensors file, a checkpoint directory, or a Hugging Face model
// directory (config.json beside model.safetensors or the shards of model.safetensors.index.json,
// each mapped, tensor by tensor; hf_directory.hpp). Accepts the family's HF names (GPT-2: an
// optional "transformer." prefix, attention-mask buffers and the tied lm_head).
// A file of another family is refused, naming the family it holds. A base file without adapter
// tensors leaves the adapters as initialised; a run's file without its frozen weights leaves them
// as the caller initialised or loaded them, and must match their fingerprint (CheckpointError).
void load_weights(const std::filesystem::path& path, Model& model);

// Weights, optimizer state and trainer state from a checkpoint directory (or `<dir>/latest`). A
// non-finite weight or optimizer value is a corrupt checkpoint (CheckpointError), not a run that
// will later look diverged. Optimizer state belongs to the optimizer that wrote it: a checkpoint
// saved by another than `optimizer` (when not empty) is refused before any state is read, and
// `checker` (the run's optimizer, when given) checks each parameter's state (Optimizer::check_state).
TrainerState load_checkpoint(const std::filesystem::path& path, Model& model, const std::string& optimizer = "",
                             const Optimizer* checker = nullptr);

// The initialisation a model gets before `base` (its starting weights, if any) is loaded over it:
// only the adapters where `base` is a Hugging Face directory, which holds every base weight (its
// load refuses a missing one), so nothing is drawn only to be overwritten (minutes for a 7B);
// else the family's whole initialisation. True when the base is whole.
bool initialise_before(Model& model, std::uint64_t seed, const std::optional<std::filesystem::path>& base);

// `<dir>/latest` resolved to a step directory (also when `path` is that `latest` file); a step
// directory as it is; throws CheckpointError when there is none.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

}  // namespace strata
