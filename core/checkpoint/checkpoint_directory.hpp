#pragma once
// The checkpoint directory as a whole: checked writable at start, locked for one run at a time,
// cleared of partial saves a killed run left behind, and pruned to the newest saves.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace strata {

// Creates the directory if needed and proves it writable with a probe file, so an unwritable
// [checkpoint] dir is refused at start rather than at the first save. Throws CheckpointError.
void check_checkpoint_directory(const std::filesystem::path& directory);

// Removes the temporary and superseded save directories (".step_*.tmp-PID", ".step_*.old-PID") and
// `latest` temporaries of other processes; returns how many it removed. Call it holding the
// directory's lock (CheckpointDirectoryLock): then they are all stale, whatever runs with that PID.
int remove_stale_partial_saves(const std::filesystem::path& directory);

// Whether `name` is a save's: "step_" and 8 digits or more, nothing else (a user's
// "step_00000006.bak" copy is not one, so pruning never touches it).
bool is_save_name(std::string_view name);

// The step_N save directories of a checkpoint directory, sorted by step (step_%08lld names sort
// so). A directory that cannot be listed sets `error` and gives what was listed.
std::vector<std::filesystem::path> step_directories(const std::filesystem::path& directory, std::error_code& error);

// Whether `directory` holds an earlier run's saves (step_N directories or `latest`) that a new run
// would number its own over and prune. Throws CheckpointError when it does and the run neither
// resumes one of this directory's own saves (`resume`) nor starts afresh (`fresh`, which then moves
// them aside with move_saves_aside).
bool check_earlier_run(const std::filesystem::path& directory, const std::optional<std::filesystem::path>& resume,
                       bool fresh);

// Moves every save and `latest` into a new <directory>/earlier-run-<UTC time>/ and returns it.
// Nothing is deleted: the earlier run can still be resumed from there (--resume DIR/earlier-run-...).
std::filesystem::path move_saves_aside(const std::filesystem::path& directory);

// Keeps the newest `keep_last` step directories (and always the one `latest` names); 0 keeps all.
// A save is renamed out of the step_* names before it is removed; a failure is a warning, and
// never leaves a step directory with part of its files.
// A save whose recorded loss is more than `divergence_factor` times below the newest save's
// (or the newest's is not finite) is kept, with a warning: a blown-up step never replaces a sound one.
void prune_checkpoints(const std::filesystem::path& directory, std::int64_t keep_last,
                       double newest_loss = std::numeric_limits<double>::quiet_NaN(), double divergence_factor = 0.0);

// An exclusive advisory lock on <directory>/.lock for the life of the object: a second run on the
// same directory is refused (CheckpointError naming the directory) instead of overwriting the first.
class CheckpointDirectoryLock {
 public:
  explicit CheckpointDirectoryLock(const std::filesystem::path& directory);
  ~CheckpointDirectoryLock();
  CheckpointDirectoryLock(const CheckpointDirectoryLock&) = delete;
  CheckpointDirectoryLock& operator=(const CheckpointDirectoryLock&) = delete;

 private:
  int descriptor_ = -1;
};

}  // namespace strata
