#include "core/plugin/library_probe.hpp"

#include <boost/dll/shared_library.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
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

// Loads paths[first..] in turn, saying which before each, and that all loaded at the end.
[[noreturn]] void load_in_child(const std::vector<std::string>& paths, std::size_t first, int progress) {
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
  loaded.reserve(paths.size());
  for (std::size_t i = first; i < paths.size(); ++i) {
    say(static_cast<std::uint32_t>(i));
    try {
      loaded.emplace_back(paths[i], boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
      if (loaded.back().has("strata_plugin"))
        (void)loaded.back().get_alias<const PluginDescriptor*() noexcept>("strata_plugin")();
    } catch (const std::exception&) {
      // the host's own load will say why
    }
  }
  say(kAllLoaded);
  ::_exit(0);  // never exit(): the parent's atexit handlers and stdio buffers are not the child's
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

std::vector<std::string> probe_libraries_in_child(const std::vector<std::filesystem::path>& paths,
                                                  std::chrono::milliseconds timeout) {
  std::vector<std::string> verdicts(paths.size());
  std::vector<std::string> files;
  for (const auto& path : paths) files.push_back(path.string());
  std::size_t next = 0;
  while (next < files.size()) {
    int progress[2];
    if (::pipe2(progress, O_CLOEXEC) != 0) return verdicts;  // no probe possible: the host loads as before
    const pid_t child = ::fork();
    if (child < 0) {
      ::close(progress[0]);
      ::close(progress[1]);
      return verdicts;
    }
    if (child == 0) {
      ::close(progress[0]);
      load_in_child(files, next, progress[1]);
    }
    ::close(progress[1]);
    // Read the child's progress until it has loaded all, ends, or one library outlasts the timeout.
    std::int64_t loading = -1;
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
      const std::int64_t expected = loading < 0 ? static_cast<std::int64_t>(next) : loading + 1;
      if (message.index != expected) {  // a library wrote into the pipe it inherited
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
    const auto culprit = static_cast<std::size_t>(loading);
    if (hung)
      verdicts[culprit] = "hung while loading (more than " + std::to_string(timeout.count() / 1000) +
                          " s in dlopen or its descriptor, in a probe process): remove it from the plugin path or "
                          "rebuild it";
    else if (garbled)
      verdicts[culprit] =
          "wrote into the probe process's pipe while loading: it is corrupt or not a plugin; remove it "
          "from the plugin path";
    else
      verdicts[culprit] = "crashed the loader (" + ending_text(status) +
                          " in dlopen or its descriptor, in a probe process): the library is corrupt; rebuild it or "
                          "remove it from the plugin path";
    next = culprit + 1;
  }
  return verdicts;
}

}  // namespace strata
