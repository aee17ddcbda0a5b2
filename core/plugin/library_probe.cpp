#include "core/plugin/library_probe.hpp"

#include <boost/dll/shared_library.hpp>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

#include "strata/plugin.hpp"

namespace strata {

namespace {

// What the child writes to the pipe: its pid (a process a library forks is not the probe) and the
// index of the library it is about to load, or kAllLoaded when it has loaded them all.
struct Progress {
  std::int32_t pid = 0;
  std::uint32_t index = 0;
};
constexpr std::uint32_t kAllLoaded = 0xffffffffu;
// Set on an index the child is about to unload: after loading them all, it unloads them in order,
// as the host does when its registry goes, so a library whose finalisers crash is named too.
constexpr std::uint32_t kUnloading = 0x40000000u;

// In a process that has loaded the CUDA driver, the probe is a fresh copy of this program,
// spawned (posix_spawn: no fork, so no fork handler runs and nothing of the parent is copied) as
//   /proc/self/exe --strata-plugin-probe FD FIRST PATH...     with STRATA_PLUGIN_PROBE_CHILD=1.
// A static initialiser of this file (run_probe_if_asked, below) recognises the call and loads the
// libraries before main(); every program that links the registry links it. The CUDA runtime does
// not support a fork after its first call, and on an H100 (CUDA 13) test processes that had forked
// probes after theirs spun for ever in the runtime at the first launch of a plugin's kernel, while
// `strata train`, whose one probe runs before any CUDA call, launched the same kernels
// (docs/benchmarks.md, "GPU"). Elsewhere the probe is a forked child that loads the libraries
// itself: the spawn costs a third of a second (the program's own libraries, cuBLAS among them, are
// loaded again), a fork next to nothing.
constexpr const char* kProbeFlag = "--strata-plugin-probe";
constexpr const char* kProbeEnvironment = "STRATA_PLUGIN_PROBE_CHILD";

// Loads paths[first..] in turn, then unloads them in turn, saying which before each, and that all
// went through at the end.
[[noreturn]] void load_libraries(const std::vector<std::string>& paths, std::size_t first, int progress) {
  // No core file and no output from the child: a crash here is expected and reported by the parent.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  for (const int fault : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(fault, SIG_DFL);
  const auto say = [&](std::uint32_t index) {
    const Progress message{static_cast<std::int32_t>(::getpid()), index};
    if (::write(progress, &message, sizeof message) != sizeof message) ::_exit(0);
  };
  // Loaded as the host loads them (registry: Boost.DLL, immediate binding, local symbols), so a
  // library that breaks the host's load breaks this one first; kept loaded, as in the host.
  std::vector<boost::dll::shared_library> loaded;
  std::vector<std::uint32_t> indices;  // of the libraries in `loaded`: one that fails to load is left to the host
  loaded.reserve(paths.size());
  for (std::size_t i = first; i < paths.size(); ++i) {
    say(static_cast<std::uint32_t>(i));
    try {
      loaded.emplace_back(paths[i], plugin_load_mode());
      indices.push_back(static_cast<std::uint32_t>(i));
      if (loaded.back().has("strata_plugin"))
        (void)loaded.back().get_alias<const PluginDescriptor*() noexcept>("strata_plugin")();
    } catch (const std::exception&) {
      // the host's own load will say why
    }
  }
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    say(indices[i] | kUnloading);
    loaded[i].unload();
  }
  say(kAllLoaded);
  ::_exit(0);  // never exit(): no atexit handler or stdio buffer of this process is flushed
}

// Whether this process has loaded the CUDA driver (the runtime loads libcuda.so at its first call)
// or mapped a GPU's device files.
bool has_loaded_a_gpu_driver() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/libcuda.so") != std::string::npos || line.find(" /dev/nvidia") != std::string::npos) return true;
  return false;
}

// Starts the probe for paths[first..], which reports on the pipe's write end `progress`; returns
// its pid, or -1 when no process could be started (the host then loads the libraries unprobed).
class ProbeProcessStarter {
 public:
  ProbeProcessStarter(const std::vector<std::string>& paths, std::size_t first, int progress, ProbeProcess process)
      : paths_(paths),
        first_(first),
        progress_(progress),
        fresh_(process == ProbeProcess::fresh_program ||
               (process == ProbeProcess::automatic && has_loaded_a_gpu_driver())) {}

  pid_t start(int read_end) const {
    if (fresh_) return spawn();  // never a fork, even where the spawn fails: then no probe runs
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(read_end);
      load_libraries(paths_, first_, progress_);
    }
    return child;
  }

 private:
  // A fresh copy of this program, the pipe's write end left open in it; -1 where that fails (no
  // /proc, an address-space limit).
  pid_t spawn() const {
    std::vector<std::string> arguments = {"strata-plugin-probe", kProbeFlag, std::to_string(progress_),
                                          std::to_string(first_)};
    arguments.insert(arguments.end(), paths_.begin() + static_cast<std::ptrdiff_t>(first_), paths_.end());
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::string marker = std::string(kProbeEnvironment) + "=1";
    std::vector<char*> envp;
    for (char** variable = environ; *variable != nullptr; ++variable) envp.push_back(*variable);
    envp.push_back(marker.data());
    envp.push_back(nullptr);
    const int flags = ::fcntl(progress_, F_GETFD);
    if (flags < 0 || ::fcntl(progress_, F_SETFD, flags & ~FD_CLOEXEC) != 0) return -1;
    pid_t probe = -1;
    if (::posix_spawn(&probe, "/proc/self/exe", nullptr, nullptr, argv.data(), envp.data()) != 0) probe = -1;
    ::fcntl(progress_, F_SETFD, flags);
    return probe;
  }

  const std::vector<std::string>& paths_;
  std::size_t first_;
  int progress_;
  bool fresh_;
};

// glibc passes an executable's initialisers (argc, argv, envp). Both the flag and the variable must
// be there, so no command line of the user's starts a probe; the variable is cleared at once, so
// nothing the probed libraries start inherits it.
__attribute__((constructor)) void run_probe_if_asked(int argc, char** argv, char** /*envp*/) {
  if (argc < 4 || std::strcmp(argv[1], kProbeFlag) != 0 || std::getenv(kProbeEnvironment) == nullptr) return;
  ::unsetenv(kProbeEnvironment);
  const int progress = std::atoi(argv[2]);
  const auto first = static_cast<std::size_t>(std::atoll(argv[3]));
  // paths[first..] are the libraries; the ones before were probed by an earlier child.
  std::vector<std::string> paths(first);
  for (int i = 4; i < argc; ++i) paths.emplace_back(argv[i]);
  load_libraries(paths, first, progress);
}

// Reaps the child and returns how it ended; none when it had not ended by `deadline` and was
// killed (it may have closed the pipe and gone on: a library's initialiser can do anything).
std::optional<int> reap(pid_t child, std::chrono::steady_clock::time_point deadline) {
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) return status;
    if (done < 0 && errno != EINTR) return 0;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      return std::nullopt;
    }
    ::usleep(1000);
  }
}

std::string ending_text(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = ::sigabbrev_np(WTERMSIG(status));
    return "signal " + std::to_string(WTERMSIG(status)) + (name != nullptr ? std::string(", SIG") + name : "");
  }
  return "exit code " + std::to_string(WEXITSTATUS(status));  // a sanitizer's, after it caught the fault
}

}  // namespace

boost::dll::load_mode::type plugin_load_mode() {
  return boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local;
}

std::vector<std::string> probe_libraries_in_child(const std::vector<std::filesystem::path>& paths,
                                                  std::chrono::milliseconds timeout, ProbeProcess process) {
  std::vector<std::string> verdicts(paths.size());
  std::vector<std::string> files;
  for (const auto& path : paths) files.push_back(path.string());
  std::size_t next = 0;
  while (next < files.size()) {
    int progress[2];
    if (::pipe2(progress, O_CLOEXEC) != 0) return verdicts;  // no probe possible: the host loads as before
    const pid_t child = ProbeProcessStarter(files, next, progress[1], process).start(progress[0]);
    if (child < 0) {
      ::close(progress[0]);
      ::close(progress[1]);
      return verdicts;
    }
    ::close(progress[1]);
    // Read the child's progress until it has loaded all, ends, or one library outlasts the timeout.
    std::int64_t loading = -1, unloading = -1;
    bool all_loaded = false, hung = false, garbled = false;
    for (;;) {
      pollfd readable{progress[0], POLLIN, 0};
      const int ready = ::poll(&readable, 1, static_cast<int>(timeout.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        hung = true;
        break;
      }
      Progress message;
      const ssize_t got = ::read(progress[0], &message, sizeof message);
      if (got < 0 && errno == EINTR) continue;
      if (got != sizeof message) break;    // the end of the pipe
      if (message.pid != child) continue;  // a process a library forked
      if (message.index == kAllLoaded) {
        all_loaded = true;
        break;
      }
      if ((message.index & kUnloading) != 0) {
        const std::int64_t index = message.index & ~kUnloading;
        const std::int64_t lowest = unloading < 0 ? static_cast<std::int64_t>(next) : unloading + 1;
        if (index < lowest || index >= static_cast<std::int64_t>(files.size()) ||
            loading + 1 != static_cast<std::int64_t>(files.size())) {
          garbled = true;
          break;
        }
        unloading = index;
        continue;
      }
      const std::int64_t expected = loading < 0 ? static_cast<std::int64_t>(next) : loading + 1;
      if (message.index != expected || unloading >= 0) {  // a library wrote into the pipe it inherited
        garbled = true;
        break;
      }
      loading = message.index;
    }
    ::close(progress[0]);
    if (hung || garbled) ::kill(child, SIGKILL);
    const std::optional<int> ended = reap(child, std::chrono::steady_clock::now() + timeout);
    if (all_loaded) break;
    hung = hung || !ended;
    const int status = ended.value_or(0);
    if (loading < 0) break;  // the child ended before its first library: no verdict to give
    const auto culprit = static_cast<std::size_t>(unloading >= 0 ? unloading : loading);
    const std::string phase = unloading >= 0 ? "unloading" : "loading";
    if (hung)
      verdicts[culprit] = "hung while " + phase + " (more than " + std::to_string(timeout.count() / 1000) + " s in " +
                          (unloading >= 0 ? "dlclose" : "dlopen or its descriptor") +
                          ", in a probe process): remove it from the plugin path or rebuild it";
    else if (garbled)
      verdicts[culprit] =
          "wrote into the probe process's pipe while loading: it is corrupt or not a plugin; remove it "
          "from the plugin path";
    else if (unloading >= 0)
      verdicts[culprit] = "crashed the loader while unloading (" + ending_text(status) +
                          " in dlclose, in a probe process): the library is corrupt or a finaliser of it fails; "
                          "rebuild it or remove it from the plugin path";
    else
      verdicts[culprit] = "crashed the loader (" + ending_text(status) +
                          " in dlopen or its descriptor, in a probe process): the library is corrupt or an "
                          "initialiser of it fails; rebuild it or remove it from the plugin path";
    next = culprit + 1;
  }
  return verdicts;
}

}  // namespace strata
