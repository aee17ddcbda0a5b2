// strata ab A.toml B.toml [...]: each manifest trains in its own process (same seed, so the same
// data order), writing JSONL that this process reads back into one table, verdicts and a report.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <thread>

#include "ab_report.hpp"
#include "commands.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_error.hpp"
#include "exit_codes.hpp"

extern char** environ;

namespace strata {

namespace po = boost::program_options;

namespace {

std::filesystem::path own_executable() {
  return std::filesystem::read_symlink("/proc/self/exe");
}

// Steps finished so far by a child, from its JSONL (one line per step after the header).
std::int64_t steps_written(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl);
  std::int64_t lines = 0;
  std::string line;
  while (std::getline(in, line)) lines += line.starts_with("{\"step\"") ? 1 : 0;
  return lines;
}

// Runs the command with stdout and stderr going to `log`; returns its exit code. While it runs,
// `progress` is called twice a second.
int run_child(const std::vector<std::string>& command, const std::filesystem::path& log,
              const std::function<void()>& progress) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::runtime_error("cannot start " + command[0] + ": " + std::strerror(error));
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error("waitpid failed: " + std::string(std::strerror(errno)));
    progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string last_error_line(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find("strata train") != std::string::npos || line.find("error") != std::string::npos) last = line;
  return last;
}

}  // namespace

int command_ab(const std::vector<std::string>& arguments) {
  std::vector<std::string> manifests;
  std::vector<std::string> overrides;
  std::int64_t steps = 0;
  std::string html;
  std::string out_dir;
  double tolerance = 1e-2;
  po::options_description options("ab options");
  options.add_options()("manifest", po::value(&manifests)->composing(),
                        "two or more manifests; the first is the reference")(
      "steps", po::value(&steps), "train each for this many steps (sets train.steps)")(
      "set", po::value(&overrides)->composing(), "override a key in every manifest (repeatable)")(
      "html", po::value(&html), "also write a self-contained HTML report here")(
      "out", po::value(&out_dir)->default_value("runs/ab"), "where each run's JSONL and log go")(
      "tolerance", po::value(&tolerance)->default_value(1e-2),
      "largest relative loss difference, at any step, still called 'within tolerance'");
  options.add_options()("help,h", "show this help");
  po::positional_options_description positional;
  positional.add("manifest", -1);
  const std::string synopsis = "A.toml B.toml [more.toml...] [--steps N] [--set key=value]... [--html FILE]";
  po::variables_map values;
  try {
    po::store(po::command_line_parser(arguments).options(options).positional(positional).run(), values);
    if (values.count("help")) {
      std::cout << "usage: strata ab " << synopsis << "\n\n" << options;
      return kExitSuccess;
    }
    po::notify(values);
    if (manifests.size() < 2) throw po::error("needs at least two manifests to compare");
    if (values.count("steps") && steps < 1) throw po::error("--steps must be at least 1");
  } catch (const po::error& e) {
    std::cerr << "strata ab: " << e.what() << "\nusage: strata ab " << synopsis << '\n';
    return kExitInvalidInput;
  }

  // Validate everything before the first run starts, and take the reference's seed for all.
  std::vector<std::string> shared = overrides;
  if (steps > 0) shared.push_back("train.steps=" + std::to_string(steps));
  std::uint64_t seed = 0;
  std::vector<std::int64_t> total_steps;  // per manifest, for the progress line
  try {
    for (std::size_t i = 0; i < manifests.size(); ++i) {
      const Manifest manifest = load_manifest(manifests[i], shared);
      if (i == 0) seed = manifest.train.seed;
      total_steps.push_back(manifest.train.steps);
    }
  } catch (const ManifestError& e) {
    std::cerr << "strata ab: invalid manifest:\n" << e.what() << '\n';
    return kExitInvalidInput;
  }
  shared.push_back("train.seed=" + std::to_string(seed));

  std::filesystem::create_directories(out_dir);
  std::vector<AbRun> runs;
  std::set<std::string> labels;
  bool any_failed = false;
  for (std::size_t i = 0; i < manifests.size(); ++i) {
    std::string label = std::filesystem::path(manifests[i]).stem().string();
    while (labels.count(label)) label += "'";
    labels.insert(label);
    const std::string base = std::to_string(i + 1) + "-" + std::filesystem::path(manifests[i]).stem().string();
    const std::filesystem::path jsonl = std::filesystem::path(out_dir) / (base + ".jsonl");
    const std::filesystem::path log = std::filesystem::path(out_dir) / (base + ".log");
    std::filesystem::remove(jsonl);
    std::vector<std::string> command = {own_executable().string(), "train", manifests[i], "--metrics", jsonl.string()};
    for (const std::string& assignment : shared) command.insert(command.end(), {"--set", assignment});
    const std::string prefix =
        "[" + std::to_string(i + 1) + "/" + std::to_string(manifests.size()) + "] " + manifests[i] + " ... ";
    std::printf("%s", prefix.c_str());
    std::fflush(stdout);
    const bool terminal = isatty(STDOUT_FILENO) != 0;
    const auto start = std::chrono::steady_clock::now();
    auto progress = [&] {
      if (!terminal) return;  // logs get one line per run
      std::printf("\r%sstep %lld/%lld", prefix.c_str(), static_cast<long long>(steps_written(jsonl)),
                  static_cast<long long>(total_steps[i]));
      std::fflush(stdout);
    };
    AbRun run;
    try {
      const int code = run_child(command, log, progress);
      run = read_ab_run(jsonl);
      run.exit_code = code;
    } catch (const std::exception& e) {
      run.exit_code = kExitRunFailed;
      run.failure = e.what();
    }
    run.manifest = manifests[i];
    run.label = label;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (run.exit_code != 0 && run.failure.empty()) run.failure = last_error_line(log);
    if (terminal) std::printf("\r%s", prefix.c_str());
    std::printf("%s in %.1f s (log: %s)%s\n", run.exit_code == 0 ? "done" : "FAILED", seconds, log.c_str(),
                terminal ? "\x1b[K" : "");
    if (run.exit_code != 0) {
      std::printf("    exit %d: %s\n", run.exit_code, run.failure.c_str());
      any_failed = true;
    }
    runs.push_back(std::move(run));
  }

  std::vector<AbVerdict> verdicts;
  for (const AbRun& run : runs)
    verdicts.push_back(&run == &runs.front() ? AbVerdict{} : compare_runs(runs.front(), run, tolerance));
  std::printf("\n");
  print_ab_table(std::cout, runs, verdicts);
  if (!html.empty()) {
    const std::filesystem::path html_path(html);
    if (html_path.has_parent_path()) std::filesystem::create_directories(html_path.parent_path());
    std::ofstream report(html_path);
    write_ab_html(report, runs, verdicts);
    if (!report) {
      std::cerr << "strata ab: cannot write " << html << '\n';
      return kExitRunFailed;
    }
    std::printf("\nreport: %s\n", html.c_str());
  }
  return any_failed ? kExitRunFailed : kExitSuccess;
}

}  // namespace strata
