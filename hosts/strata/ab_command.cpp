// strata ab A.toml B.toml [...]: each manifest trains in its own process, writing JSONL that this
// process reads back into one table, verdicts against the first manifest's run, and a report.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "ab_conditions.hpp"
#include "ab_report.hpp"
#include "ab_verdict.hpp"
#include "command_line_style.hpp"
#include "command_support.hpp"
#include "commands.hpp"
#include "core/errors/data_error.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"
#include "core/planner/memory_prediction.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/stack.hpp"
#include "core/training/memory_timeline.hpp"
#include "core/training/run_outputs.hpp"
#include "core/util/atomic_file.hpp"
#include "exit_codes.hpp"

extern char** environ;

namespace strata {

namespace po = boost::program_options;

namespace {

std::filesystem::path own_executable() {
  return std::filesystem::read_symlink("/proc/self/exe");
}

// `name` in a directory of PATH, as a shell would find it; empty when none holds it.
std::filesystem::path find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream directories(path != nullptr ? path : "");
  for (std::string directory; std::getline(directories, directory, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(directory.empty() ? "." : directory) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Steps finished so far by a child, from its JSONL (one line per step after the header).
std::int64_t steps_written(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl);
  std::int64_t lines = 0;
  std::string line;
  while (std::getline(in, line)) lines += line.starts_with("{\"step\"") ? 1 : 0;
  return lines;
}

// What a child run left: its exit code and the last line it wrote to stderr (its error message).
struct ChildOutcome {
  int exit_code = 0;
  std::string last_stderr_line;
};

// Keeps the last non-empty line of a stream that arrives in pieces.
class LastLine {
 public:
  void add(std::string_view text) {
    for (char c : text) {
      if (c == '\n') {
        finish();
      } else {
        partial_ += c;
      }
    }
  }
  std::string get() {
    finish();
    return last_;
  }

 private:
  void finish() {
    if (partial_.find_first_not_of(" \t\r") != std::string::npos) last_ = partial_;
    partial_.clear();
  }
  std::string partial_;
  std::string last_;
};

// Closes a file descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Runs the command with stdout going to `log` and stderr through a pipe into the same log (so the
// child's last error line is known); returns its exit code. While it runs, `progress` is called
// twice a second.
ChildOutcome run_child(const std::vector<std::string>& command, const std::filesystem::path& log,
                       const std::function<void()>& progress) {
  // O_APPEND on both writers: the child's stdout and this process's copy of its stderr interleave
  // without overwriting each other.
  const FileDescriptor log_fd(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644));
  if (log_fd.get() < 0) throw std::runtime_error("cannot write " + log.string() + ": " + std::strerror(errno));
  int pipe_ends[2];
  if (::pipe2(pipe_ends, O_CLOEXEC) != 0)
    throw std::runtime_error("cannot create a pipe: " + std::string(std::strerror(errno)));
  const FileDescriptor stderr_read(pipe_ends[0]);
  FileDescriptor stderr_write(pipe_ends[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Nothing to read: a child that reads stdin (mpirun forwards it to rank 0) must not take the
  // terminal's, nor stop a comparison run in the background.
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_write.get(), STDERR_FILENO);
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  stderr_write.reset();  // the child holds the only write end: end of file when it exits
  if (error != 0) throw std::runtime_error("cannot start " + command[0] + ": " + std::strerror(error));
  LastLine last_line;
  enum class Pipe { data, quiet, closed };
  // Copies what the pipe holds into the log, waiting up to timeout_ms for something to arrive.
  auto drain = [&](int timeout_ms) {
    pollfd ready{stderr_read.get(), POLLIN, 0};
    if (::poll(&ready, 1, timeout_ms) <= 0) return Pipe::quiet;
    char buffer[4096];
    const ssize_t n = ::read(stderr_read.get(), buffer, sizeof buffer);
    if (n < 0) return errno == EINTR ? Pipe::quiet : Pipe::closed;
    if (n == 0) return Pipe::closed;
    last_line.add(std::string_view(buffer, static_cast<std::size_t>(n)));
    for (ssize_t written = 0; written < n;) {
      const ssize_t w = ::write(log_fd.get(), buffer + written, static_cast<std::size_t>(n - written));
      if (w <= 0) break;  // the log is best effort; the exit code and the last line still arrive
      written += w;
    }
    return Pipe::data;
  };
  int status = 0;
  bool pipe_open = true;
  auto last_progress = std::chrono::steady_clock::now();
  while (true) {
    if (pipe_open)
      pipe_open = drain(500) != Pipe::closed;
    else  // the child closed stderr as it exited: it is about to be reaped
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error("waitpid failed: " + std::string(std::strerror(errno)));
    if (std::chrono::steady_clock::now() - last_progress >= std::chrono::milliseconds(500)) {
      progress();
      last_progress = std::chrono::steady_clock::now();
    }
  }
  // What the child wrote just before it exited (nothing else holds the pipe, so this ends).
  while (pipe_open && drain(0) == Pipe::data) {
  }
  ChildOutcome outcome;
  outcome.last_stderr_line = last_line.get();
  if (WIFEXITED(status))
    outcome.exit_code = WEXITSTATUS(status);
  else
    outcome.exit_code = 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return outcome;
}

// Data is read from regular files only; a missing one is invalid input, found before any run.
void check_data_file(const std::filesystem::path& path, const Manifest& manifest, const char* key) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw DataError(path.string() + ": " +
                    (std::filesystem::exists(path, error) ? "not a regular file" : "no such file") + " ([data] " + key +
                    " in " + manifest.path.string() + ")");
}

// A TOML basic string holding `text`.
std::string toml_string(const std::string& text) {
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// --set assignments that send a run's own outputs under `run_dir`: its checkpoints and every
// telemetry file its manifest names. A comparison never writes into the manifests' checkpoint
// directories or logs, which a later --resume or plot would read (the user's files stay as they were).
std::vector<std::string> own_outputs(const Manifest& manifest, const std::filesystem::path& run_dir) {
  std::filesystem::remove_all(run_dir);  // this folder is ab's own: a previous comparison's run
  std::vector<std::string> assignments;
  if (manifest.checkpoint.dir)
    assignments.push_back("checkpoint.dir=" + toml_string((run_dir / "checkpoints").string()));
  for (std::size_t t = 0; t < manifest.telemetry.size(); ++t) {
    const PluginSpec& spec = manifest.telemetry[t];
    const auto* path = spec.table != nullptr ? spec.table->get_as<std::string>("path") : nullptr;
    if (path == nullptr) continue;
    const std::string file = "telemetry-" + std::to_string(t) + std::filesystem::path(path->get()).extension().string();
    assignments.push_back("telemetry." + std::to_string(t) + ".path=" + toml_string((run_dir / file).string()));
  }
  return assignments;
}

// The report's within-step timelines: the run's own (rank 0's, for ranks > 1), and the planner's
// prediction of it.
void add_timelines(AbRun& run, const Manifest& manifest, const std::filesystem::path& measured, int ranks) {
  std::vector<std::string> notes;
  std::error_code error;
  if (std::filesystem::exists(measured, error)) {
    try {
      run.measured_timeline = read_timeline(measured);
    } catch (const std::invalid_argument& e) {
      notes.push_back(std::string("measured timeline unreadable: ") + e.what());
    }
  } else {
    notes.push_back("the run wrote no memory timeline (it stopped before the step)");
  }
  try {
    PluginRegistry registry = load_plugins(manifest);
    MemoryTimeline predicted;
    (void)predict_memory(manifest, registry, nullptr, nullptr, &predicted,
                         ranks > 1 ? std::optional<PlannedRank>(PlannedRank{0, ranks}) : std::nullopt);
    run.predicted_timeline = std::move(predicted);
  } catch (const std::exception& e) {
    notes.push_back(std::string("no prediction: ") + e.what());
  }
  for (const std::string& note : notes) run.timeline_note += (run.timeline_note.empty() ? "" : "; ") + note;
}

// What a manifest's stack trains (describe_training), or why its stack cannot be built here.
struct TrainingOf {
  std::optional<std::string> description;
  std::string problem;  // when there is no description
};

TrainingOf training_of(const Manifest& manifest) {
  try {
    PluginRegistry registry = load_plugins(manifest);
    HostServicesImpl host(manifest.model.info(), manifest.device.kind);  // outlives the stack's objects
    const Stack stack = build_stack(manifest, registry, host, "");
    return {describe_training(stack.trainable, manifest.model.n_layer()), {}};
  } catch (const std::exception& error) {
    return {std::nullopt, error.what()};
  }
}

}  // namespace

int command_ab(const std::vector<std::string>& arguments) {
  std::vector<std::string> manifest_paths;
  std::vector<std::string> overrides;
  std::int64_t steps = 0;
  std::int64_t last_k = 0;
  std::string html;
  std::string out_dir;
  int ranks = 1;
  AbSettings settings;
  po::options_description options("ab options");
  options.add_options()("manifest", po::value(&manifest_paths)->composing(),
                        "two or more manifests; the first is the reference")(
      "steps", po::value(&steps), "train each for this many steps (sets train.steps)")(
      "set", po::value(&overrides)->composing(), "override a key in every manifest (repeatable)")(
      "html", po::value(&html), "also write a self-contained HTML report here")(
      "out", po::value(&out_dir)->default_value("runs/ab"), "where each run's JSONL and log go")(
      "ranks", po::value(&ranks)->default_value(1),
      "train each manifest on this many data-parallel ranks (mpirun -np N; [distributed] picks the stage)")(
      "tolerance", po::value(&settings.tolerance)->default_value(kDefaultTolerance),
      "largest relative loss difference (mean over the last k steps, and any single step) still called "
      "'within tolerance'")("last-k", po::value(&last_k),
                            "compare the mean loss over the last N steps (default: min(10, steps/4 rounded up))");
  options.add_options()("help,h", "show this help");
  po::positional_options_description positional;
  positional.add("manifest", -1);
  const std::string synopsis =
      "A.toml B.toml [more.toml...] [--steps N] [--set key=value]... [--html FILE] [--tolerance X] [--last-k N] "
      "[--ranks N]";
  po::variables_map values;
  try {
    po::store(po::command_line_parser(arguments).options(options).positional(positional).style(kCommandLineStyle).run(),
              values);
    if (values.count("help")) {
      std::cout << "usage: strata ab " << synopsis << "\n\n" << options;
      return kExitSuccess;
    }
    po::notify(values);
    if (manifest_paths.size() < 2) throw po::error("needs at least two manifests to compare");
    if (values.count("steps") && steps < 1) throw po::error("--steps must be at least 1");
    if (!(settings.tolerance >= 0.0) || !std::isfinite(settings.tolerance))
      throw po::error("--tolerance must be a finite number >= 0");
    if (values.count("last-k") && last_k < 1) throw po::error("--last-k must be at least 1");
    if (ranks < 1 || ranks > 1024) throw po::error("--ranks must be 1 to 1024");
  } catch (const po::error& e) {
    std::cerr << "strata ab: " << e.what() << "\nusage: strata ab " << synopsis << '\n';
    return kExitInvalidInput;
  }
  settings.tolerance_given = !values["tolerance"].defaulted();
  if (values.count("last-k")) settings.last_k = last_k;

  // Validate every manifest and its data before the first run starts. The loaded manifests, with
  // the children's overrides, decide which runs' losses can be compared.
  std::vector<std::string> shared = overrides;
  if (steps > 0) shared.push_back("train.steps=" + std::to_string(steps));
  std::vector<Manifest> manifests;
  try {
    for (const std::string& path : manifest_paths) {
      manifests.push_back(load_manifest(path, shared));
      const Manifest& manifest = manifests.back();
      check_data_file(manifest.data.train, manifest, "train");
      if (manifest.data.val) check_data_file(*manifest.data.val, manifest, "val");
    }
  } catch (const ManifestError& e) {
    std::cerr << "strata ab: invalid manifest:\n" << e.what() << '\n';
    return kExitInvalidInput;
  } catch (const DataError& e) {
    std::cerr << "strata ab: invalid data: " << e.what() << '\n';
    return kExitInvalidInput;
  }

  // The outputs too: a report that cannot be written is refused now, not after every run trained.
  try {
    if (!html.empty()) {
      check_output_file("--html", html);
      for (const Manifest& manifest : manifests) refuse_overwriting_inputs("--html", html, manifest);
    }
    check_output_file("--out", std::filesystem::path(out_dir) / "1.jsonl");
  } catch (const ManifestError& e) {
    std::cerr << "strata ab: " << e.what() << '\n';
    return kExitInvalidInput;
  }
  // More than one rank: each run is mpirun's, with as many ranks (as root, which Open MPI refuses
  // unless told; more ranks than cores, which it refuses unless told too).
  std::vector<std::string> launcher;
  if (ranks > 1) {
    const std::filesystem::path mpirun = find_on_path("mpirun");
    if (mpirun.empty()) {
      std::cerr << "strata ab: --ranks " << ranks
                << " runs each manifest under mpirun, which is not on PATH (Debian: apt-get install openmpi-bin)\n";
      return kExitInvalidInput;
    }
    // --quiet: without mpirun's own banners after a failing rank's message, the run's last error
    // line is the rank's.
    launcher = {mpirun.string(), "-np", std::to_string(ranks), "--oversubscribe", "--quiet"};
    if (::geteuid() == 0) launcher.push_back("--allow-run-as-root");
  }
  std::vector<AbRun> runs;
  std::set<std::string> labels;
  bool any_failed = false;
  for (std::size_t i = 0; i < manifest_paths.size(); ++i) {
    const std::string stem = std::filesystem::path(manifest_paths[i]).stem().string();
    std::string label = stem;
    while (labels.count(label)) label += "'";
    labels.insert(label);
    const std::string base = std::to_string(i + 1) + "-" + stem;
    const std::filesystem::path jsonl = std::filesystem::path(out_dir) / (base + ".jsonl");
    const std::filesystem::path log = std::filesystem::path(out_dir) / (base + ".log");
    const std::filesystem::path timeline = std::filesystem::path(out_dir) / (base + ".timeline.json");
    std::filesystem::remove(jsonl);
    std::filesystem::remove(timeline);
    std::vector<std::string> command = launcher;
    command.insert(command.end(), {own_executable().string(), "train", manifest_paths[i], "--metrics", jsonl.string()});
    if (!html.empty()) command.insert(command.end(), {"--memory-timeline", timeline.string()});
    for (const std::string& assignment : shared) command.insert(command.end(), {"--set", assignment});
    for (const std::string& assignment : own_outputs(manifests[i], std::filesystem::path(out_dir) / base))
      command.insert(command.end(), {"--set", assignment});
    const std::string prefix =
        "[" + std::to_string(i + 1) + "/" + std::to_string(manifest_paths.size()) + "] " + manifest_paths[i] + " ... ";
    std::printf("%s", prefix.c_str());
    std::fflush(stdout);
    const bool terminal = isatty(STDOUT_FILENO) != 0;
    const auto start = std::chrono::steady_clock::now();
    auto progress = [&] {
      if (!terminal) return;  // logs get one line per run
      std::printf("\r%sstep %lld/%lld", prefix.c_str(), static_cast<long long>(steps_written(jsonl)),
                  static_cast<long long>(manifests[i].train.steps));
      std::fflush(stdout);
    };
    AbRun run;
    ChildOutcome outcome;
    try {
      outcome = run_child(command, log, progress);
    } catch (const std::exception& e) {
      outcome = {kExitRunFailed, e.what()};
    }
    try {
      run = read_ab_run(jsonl);
    } catch (const std::exception& e) {  // a record cut short: the run's metrics are not whole
      run = AbRun{};
      if (outcome.exit_code == 0) outcome = {kExitRunFailed, std::string("unreadable metrics: ") + e.what()};
    }
    run.exit_code = outcome.exit_code;
    run.manifest = manifest_paths[i];
    run.label = label;
    if (run.failed()) run.failure = outcome.last_stderr_line;
    if (run.exit_code == 0 && !run.complete) run.failure = "no summary record in " + jsonl.string();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (terminal) std::printf("\r%s", prefix.c_str());
    std::printf("%s in %.1f s (log: %s)%s\n", run.failed() ? "FAILED" : "done", seconds, log.c_str(),
                terminal ? "\x1b[K" : "");
    if (run.failed()) {
      std::printf("    exit %d: %s\n", run.exit_code,
                  run.failure.empty() ? "(nothing on stderr)" : run.failure.c_str());
      any_failed = true;
    }
    if (!html.empty()) add_timelines(run, manifests[i], timeline, ranks);
    runs.push_back(std::move(run));
  }

  std::vector<AbVerdict> verdicts = {reference_verdict(runs.front())};
  // What trains is compared from the stacks; one that cannot be built here is said, not skipped
  // in silence (the verdict then cannot know a change of what trains from a failure).
  const TrainingOf reference_training = training_of(manifests.front());
  if (!reference_training.description)
    std::printf("note: what trains is not compared: %s's stack cannot be built here: %s\n",
                manifests.front().path.string().c_str(), reference_training.problem.c_str());
  for (std::size_t i = 1; i < runs.size(); ++i) {
    AbConditions conditions = compare_conditions(manifests.front(), manifests[i]);
    const TrainingOf training = training_of(manifests[i]);
    if (!training.description && reference_training.description)
      std::printf("note: what trains is not compared for %s: its stack cannot be built here: %s\n",
                  manifests[i].path.string().c_str(), training.problem.c_str());
    if (reference_training.description && training.description &&
        *training.description != *reference_training.description)
      conditions.training_change = "what trains: " + *reference_training.description + " vs " + *training.description;
    verdicts.push_back(compare_runs(runs.front(), runs[i], conditions, settings));
  }
  std::printf("\n");
  print_ab_table(std::cout, runs, verdicts);
  std::cout << '\n';
  print_ab_verdicts(std::cout, runs, verdicts, settings);
  std::cout.flush();
  if (!html.empty()) {
    std::ostringstream report;
    write_ab_html(report, runs, verdicts, settings);
    try {
      write_file_atomically(html, report.str());
    } catch (const std::exception& e) {
      std::cerr << "strata ab: cannot write " << html << ": " << e.what() << '\n';
      return kExitRunFailed;
    }
    std::printf("\nreport: %s\n", html.c_str());
  }
  return any_failed ? kExitRunFailed : kExitSuccess;
}

}  // namespace strata
