#include "core/checkpoint/checkpoint_directory.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/safetensors.hpp"

namespace strata {

namespace fs = std::filesystem;

void check_checkpoint_directory(const fs::path& directory) {
  const std::string where = directory.string() + " ([checkpoint] dir): ";
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) throw CheckpointError(where + "cannot create it: " + error.message());
  if (!fs::is_directory(directory, error)) throw CheckpointError(where + "not a directory");
  const fs::path probe = directory / (".write-probe-" + std::to_string(::getpid()));
  {
    std::ofstream out(probe, std::ios::binary);
    if (!(out << "probe") || !out.flush()) {
      fs::remove(probe, error);
      throw CheckpointError(where + "not writable");
    }
  }
  fs::remove(probe, error);
}

namespace {

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The PID in the name of what a save leaves while it is written or replaced: ".step_N.tmp-PID",
// ".step_N.old-PID" (N of 8 digits or more, as saves are named) or "latest.tmp-PID"; 0 for any
// other name, which is not Strata's to remove (a user's ".step_notes.tmp-1" among them).
pid_t partial_save_owner(const std::string& name) {
  std::string_view rest = name;
  if (rest.starts_with("latest.tmp-")) {
    rest.remove_prefix(std::string_view("latest.tmp-").size());
  } else {
    if (!rest.starts_with(".step_")) return 0;
    rest.remove_prefix(std::string_view(".step_").size());
    const std::size_t dot = rest.find('.');
    if (dot == std::string_view::npos || dot < 8 || !all_digits(rest.substr(0, dot))) return 0;
    rest.remove_prefix(dot);
    if (!rest.starts_with(".tmp-") && !rest.starts_with(".old-")) return 0;
    rest.remove_prefix(5);
  }
  if (!all_digits(rest) || rest.size() > 10) return 0;
  const long long pid = std::stoll(std::string(rest));
  return pid <= std::numeric_limits<pid_t>::max() ? static_cast<pid_t>(pid) : 0;
}

}  // namespace

bool is_save_name(std::string_view name) {
  return name.starts_with("step_") && name.size() >= 13 && all_digits(name.substr(5));
}

int remove_stale_partial_saves(const fs::path& directory) {
  std::error_code error;
  int removed = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    const pid_t owner = partial_save_owner(entry.path().filename().string());
    // The caller holds the directory's lock, so no other live run can own a partial save here: a
    // running process with the owner's PID is a reused PID, not the writer.
    if (owner <= 0 || owner == ::getpid()) continue;
    fs::remove_all(entry.path(), error);
    if (error)
      spdlog::warn("could not remove {}, a partial save of a stopped run ({}); delete it by hand",
                   entry.path().string(), error.message());
    else
      ++removed;
  }
  return removed;
}

namespace {

// The training loss a save recorded, if any.
std::optional<double> saved_loss(const fs::path& save) {
  std::ifstream in(save / "trainer.json");
  const nlohmann::json trainer = nlohmann::json::parse(in, nullptr, false);
  if (trainer.is_discarded() || !trainer.contains("loss") || !trainer["loss"].is_number()) return std::nullopt;
  return trainer["loss"].get<double>();
}

}  // namespace

std::vector<fs::path> step_directories(const fs::path& directory, std::error_code& error) {
  std::vector<fs::path> saves;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    std::error_code status_error;
    if (is_save_name(entry.path().filename().string()) && entry.is_directory(status_error))
      saves.push_back(entry.path());
  }
  std::sort(saves.begin(), saves.end());
  return saves;
}

bool check_earlier_run(const fs::path& directory, const std::optional<fs::path>& resume, bool fresh) {
  std::error_code error;
  const std::vector<fs::path> saves = step_directories(directory, error);
  if (saves.empty() && !fs::exists(directory / "latest", error)) return false;
  if (fresh) return true;
  // Continuing here means resuming this directory or one of its own saves (not one moved aside).
  if (resume && (fs::equivalent(*resume, directory, error) ||
                 fs::equivalent(resolve_checkpoint(*resume).parent_path(), directory, error)))
    return true;
  throw CheckpointError(directory.string() + ": holds an earlier run's saves (" +
                        (saves.empty() ? std::string("its 'latest' file")
                                       : std::to_string(saves.size()) + " step directories, the last " +
                                             saves.back().filename().string()) +
                        "), which this run would write over and prune. Continue that run with --resume" +
                        (resume ? " (" + resume->string() + " is not one of its saves)" : std::string()) +
                        ", or start again with --fresh, which first moves them into " +
                        (directory / "earlier-run-<time>").string() + "/");
}

fs::path move_saves_aside(const fs::path& directory) {
  // Named by the time they were moved, in UTC, so that a listing sorts them by age.
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  fs::path aside = directory / (std::string("earlier-run-") + stamp);
  for (int n = 2; fs::exists(aside); ++n)
    aside = directory / (std::string("earlier-run-") + stamp + "-" + std::to_string(n));
  fs::create_directory(aside);
  // `latest` last: until it moves, the directory still resumes as it was. All or nothing: a move
  // that fails (an immutable save) puts the ones already moved back.
  std::error_code listed;
  std::vector<fs::path> saves = step_directories(directory, listed);
  if (fs::exists(directory / "latest", listed)) saves.push_back(directory / "latest");
  for (std::size_t moved = 0; moved < saves.size(); ++moved) {
    std::error_code error;
    fs::rename(saves[moved], aside / saves[moved].filename(), error);
    if (!error) continue;
    for (std::size_t back = moved; back-- > 0;) {
      std::error_code ignored;
      fs::rename(aside / saves[back].filename(), saves[back], ignored);
    }
    std::error_code ignored;
    fs::remove(aside, ignored);
    throw CheckpointError(saves[moved].string() + ": cannot move it aside (" + error.message() +
                          "); nothing was moved, and the earlier run's saves are where they were");
  }
  return aside;
}

void prune_checkpoints(const fs::path& directory, std::int64_t keep_last, double newest_loss,
                       double divergence_factor) {
  if (keep_last <= 0) return;
  std::error_code error;
  const std::vector<fs::path> saves = step_directories(directory, error);
  const fs::path latest = resolve_checkpoint(directory);
  const auto excess = static_cast<std::int64_t>(saves.size()) - keep_last;
  for (std::int64_t i = 0; i < excess; ++i) {
    const fs::path& save = saves[static_cast<std::size_t>(i)];
    if (save == latest) continue;
    if (const auto loss = saved_loss(save);
        divergence_factor > 0.0 && loss && (!std::isfinite(newest_loss) || newest_loss > divergence_factor * *loss)) {
      spdlog::warn("kept {} (loss {}): the newest save's loss {} is above train.divergence_factor = {} times it",
                   save.string(), *loss, newest_loss, divergence_factor);
      continue;
    }
    // Renamed out of the step_* names first, so that a removal that fails part-way (an immutable
    // file, a permission) never leaves a step directory that looks whole but is not.
    const fs::path doomed = directory / ("." + save.filename().string() + ".old-" + std::to_string(::getpid()));
    fs::rename(save, doomed, error);
    if (error) {
      spdlog::warn("could not prune {} ({}); it is kept whole", save.string(), error.message());
      continue;
    }
    fs::remove_all(doomed, error);
    if (error)
      spdlog::warn("pruning {}: could not remove all of {} ({}); delete it by hand", save.string(), doomed.string(),
                   error.message());
  }
}

CheckpointDirectoryLock::CheckpointDirectoryLock(const fs::path& directory) {
  const fs::path path = directory / ".lock";
  descriptor_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (descriptor_ < 0) throw CheckpointError(path.string() + ": cannot open the lock file");
  if (::flock(descriptor_, LOCK_EX | LOCK_NB) != 0) {
    ::close(descriptor_);
    descriptor_ = -1;
    throw CheckpointError(directory.string() +
                          " ([checkpoint] dir): another run is using this checkpoint directory; give each run its "
                          "own dir");
  }
}

CheckpointDirectoryLock::~CheckpointDirectoryLock() {
  if (descriptor_ >= 0) ::close(descriptor_);  // closing releases the lock
}

}  // namespace strata
