#include "core/training/run_outputs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <string>

#include "core/errors/manifest_error.hpp"
#include "core/util/path_inside.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

// Entries of a checkpoint directory that belong to its saves: step_*, latest, .lock and the
// hidden partial saves and temporaries (".step_*", "latest.tmp-*").
bool checkpoint_entry(const fs::path& relative) {
  const std::string first = relative.begin()->string();
  return first == "." || first.starts_with("step_") || first.starts_with(".") || first.starts_with("latest");
}

// How the built-in sinks begin a file: jsonl with its run record, csv with its header.
bool written_by_a_sink(const fs::path& path, const std::string& plugin) {
  std::ifstream in(path, std::ios::binary);
  std::string first;
  if (!in || !std::getline(in, first)) return true;  // empty: nothing to lose
  if (plugin == "jsonl") return first.starts_with("{\"record\":\"run\"");
  if (plugin == "csv") return first.starts_with("step,phase,loss,");
  return false;
}

// The files a manifest's run reads, each with what it is for a message.
std::vector<std::pair<fs::path, std::string>> input_files(const Manifest& manifest) {
  std::vector<std::pair<fs::path, std::string>> inputs = {{manifest.path, "the manifest"},
                                                          {manifest.data.train, "the training data ([data] train)"}};
  if (manifest.data.val) inputs.emplace_back(*manifest.data.val, "the validation data ([data] val)");
  if (manifest.train.init_from) inputs.emplace_back(*manifest.train.init_from, "the base weights (train.init_from)");
  if (manifest.model.from) inputs.emplace_back(*manifest.model.from, "the model directory ([model] from)");
  return inputs;
}

}  // namespace

void refuse_overwriting_inputs(const std::string& option, const fs::path& output, const Manifest& manifest) {
  std::vector<std::pair<fs::path, std::string>> inputs = input_files(manifest);
  if (manifest.checkpoint.dir)
    inputs.emplace_back(*manifest.checkpoint.dir, "the checkpoint directory ([checkpoint] dir)");
  for (const auto& [input, what] : inputs)
    if (const auto relative = path_within(output, input))
      throw ManifestError(option + " " + output.string() + ": is " + (*relative == "." ? "" : "inside ") + what +
                          " of " + manifest.path.string() + ": write it elsewhere");
}

RunOutputs::RunOutputs(const Manifest& manifest, const std::optional<fs::path>& resume, bool allow_overwrite,
                       const std::optional<fs::path>& memory_timeline) {
  std::vector<std::pair<fs::path, std::string>> files = input_files(manifest);
  // A checkpoint directory's own entries are inputs; a save's directory (trainer.json inside) all of it.
  std::vector<std::pair<fs::path, std::string>> checkpoint_directories;
  if (manifest.checkpoint.dir)
    checkpoint_directories.emplace_back(*manifest.checkpoint.dir, "the checkpoint directory ([checkpoint] dir)");
  std::error_code error;
  if (resume && fs::is_regular_file(*resume / "trainer.json", error))
    files.emplace_back(*resume, "the save being resumed");
  else if (resume)
    checkpoint_directories.emplace_back(*resume, "the checkpoint directory being resumed");

  // An output inside what the run reads, or inside a save it reads and writes, is refused.
  const auto refuse_inputs = [&](const fs::path& path, const std::string& where) {
    for (const auto& [input, what] : files)
      if (const auto relative = path_within(path, input))
        throw ManifestError(where + "is " + (*relative == "." ? "" : "inside ") + what +
                            ", which this run reads: write telemetry elsewhere");
    for (const auto& [directory, what] : checkpoint_directories)
      if (const auto relative = path_within(path, directory); relative && checkpoint_entry(*relative))
        throw ManifestError(where + "is " + (*relative == "." ? "" : "inside a save of ") + what +
                            ", which this run reads and writes: write telemetry elsewhere");
  };
  for (const PluginSpec& sink : manifest.telemetry) {
    const auto* value = sink.table->get_as<std::string>("path");
    if (value == nullptr || value->get().empty()) continue;
    const fs::path path = value->get();
    const std::string where = sink.label + " path = \"" + path.string() + "\": ";
    refuse_inputs(path, where);
    // A FIFO nobody reads would block the run at its first line, silently: refused. One with a
    // reader (a pipe into another program) is written through, as a device is.
    if (fs::is_fifo(path, error)) {
      const int probe = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (probe < 0 && errno == ENXIO)
        throw ManifestError(where +
                            "is a FIFO that no program is reading: the run would block at its first "
                            "line; start the reader first, or write telemetry to a file");
      // Held open for the run: closing it would leave the reader without a writer, and most
      // readers end there (end of file) before the sink opens the FIFO itself.
      if (probe >= 0) lock_descriptors_.push_back(probe);
    }
    // A device (/dev/null) is written through, not replaced, and runs may share it.
    if (fs::exists(path, error) && !fs::is_regular_file(path, error)) continue;
    for (const Output& earlier : outputs_)
      if (resolved_path(earlier.path) == resolved_path(path))
        throw ManifestError(where + "also named by " + earlier.where.substr(0, earlier.where.find(" path = ")) +
                            ": two sinks would interleave one file");
    if (!allow_overwrite && (sink.plugin == "jsonl" || sink.plugin == "csv") && fs::is_regular_file(path, error) &&
        !written_by_a_sink(path, sink.plugin))
      throw ManifestError(where + "exists and is not a " + sink.plugin +
                          " telemetry file Strata wrote, so writing it would destroy it (pass "
                          "--overwrite-telemetry to replace it)");
    outputs_.push_back({path, where});
  }
  if (memory_timeline) {
    const std::string where = "--memory-timeline " + memory_timeline->string() + ": ";
    refuse_inputs(*memory_timeline, where);
    for (const Output& sink : outputs_)
      if (resolved_path(sink.path) == resolved_path(*memory_timeline))
        throw ManifestError(where + "is " + sink.where.substr(0, sink.where.find(" path = ")) +
                            "'s path too: write it elsewhere");
    outputs_.push_back({*memory_timeline, where});
  }
}

void RunOutputs::lock() {
  for (const Output& output : outputs_) {
    // Beside the output, not the output itself: a resumed run's sink may replace the file by a rename.
    std::error_code error;
    if (output.path.has_parent_path()) fs::create_directories(output.path.parent_path(), error);
    const fs::path lock = output.path.parent_path() / ("." + output.path.filename().string() + ".lock");
    const int descriptor = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (descriptor < 0) continue;  // unwritable: the sink reports it, naming the path
    if (::flock(descriptor, LOCK_EX | LOCK_NB) != 0) {
      ::close(descriptor);
      throw ManifestError(output.where + "another run is writing this file; give each run its own telemetry path");
    }
    lock_descriptors_.push_back(descriptor);
    // And the file itself when it exists: another name for it (a link) has another lock file.
    const int file = ::open(output.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file < 0) continue;
    if (::flock(file, LOCK_EX | LOCK_NB) != 0) {
      ::close(file);
      throw ManifestError(output.where + "another run is writing this file; give each run its own telemetry path");
    }
    lock_descriptors_.push_back(file);
  }
}

RunOutputs::~RunOutputs() {
  for (const int descriptor : lock_descriptors_) ::close(descriptor);
}

}  // namespace strata
