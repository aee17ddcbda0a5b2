#pragma once
// The files a run writes besides its checkpoints: each [[telemetry]] table's `path` (and
// `strata train --metrics`, which adds one). Checked before anything is written, locked when the run
// starts writing:
//   * a path that is an input of the run is refused: the manifest, [data] train or val,
//     train.init_from, a file of the save being resumed, or one of a checkpoint directory's own
//     entries (step_*, latest, its lock and partial saves; a log beside them is fine);
//   * an existing file the built-in jsonl or csv sink did not write (it does not start as their
//     records do) is refused unless the user allows overwriting (`--overwrite-telemetry`);
//   * two tables naming one file are refused; each path is locked for the run (a hidden
//     `.<name>.lock` beside it), so two runs never interleave one file.
// Refusals are ManifestError naming the table, the key and what the file is.
#include <filesystem>
#include <optional>
#include <vector>

#include "core/manifest/manifest.hpp"

namespace strata {

// For an output file named on the command line (export --merge, ab --html): refuses (ManifestError)
// a path that is, or lies inside, an input of the manifest's run (its manifest, data, base weights
// or checkpoint directory). export --merge checks the checkpoint it reads itself.
void refuse_overwriting_inputs(const std::string& option, const std::filesystem::path& output,
                               const Manifest& manifest);

class RunOutputs {
 public:
  // Checks every path (the telemetry sinks', and a memory timeline's: train --memory-timeline);
  // writes nothing.
  RunOutputs(const Manifest& manifest, const std::optional<std::filesystem::path>& resume, bool allow_overwrite,
             const std::optional<std::filesystem::path>& memory_timeline = std::nullopt);
  ~RunOutputs();
  RunOutputs(const RunOutputs&) = delete;
  RunOutputs& operator=(const RunOutputs&) = delete;

  // Takes each path's lock (creating its directory), for the life of this object.
  void lock();

 private:
  struct Output {
    std::filesystem::path path;
    std::string where;  // "[[telemetry]] #2 path = \"...\": "
  };
  std::vector<Output> outputs_;
  std::vector<int> lock_descriptors_;
};

}  // namespace strata
