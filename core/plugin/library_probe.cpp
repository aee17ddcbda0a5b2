#include "core/plugin/library_probe.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

namespace strata {

namespace {

// Loads paths[first..] in turn, writing each one's index to `progress` before loading it.
[[noreturn]] void load_in_child(const std::vector<std::string>& paths, std::size_t first, int progress) {
  // No core file and no output from the child: a crash here is expected and reported by the parent.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) {
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
  }
  for (const int fault : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(fault, SIG_DFL);
  for (std::size_t i = first; i < paths.size(); ++i) {
    const auto index = static_cast<std::uint32_t>(i);
    if (::write(progress, &index, sizeof index) != sizeof index) ::_exit(0);
    // RTLD_LOCAL and no dlclose: each library stays apart from the next, as in the host.
    void* library = ::dlopen(paths[i].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) continue;  // the host's own dlopen will say why
    // STRATA_PLUGIN exports an alias: a variable that holds the descriptor function's address.
    if (void* alias = ::dlsym(library, "strata_plugin")) {
      const void* (*describe)() noexcept = nullptr;
      std::memcpy(&describe, alias, sizeof describe);
      if (describe != nullptr) (void)describe();
    }
  }
  ::_exit(0);  // never exit(): the parent's atexit handlers and stdio buffers are not the child's
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
    // Read the child's progress until its end (end of the pipe) or a library outlasts the timeout.
    std::int64_t loading = -1;
    bool hung = false;
    for (;;) {
      pollfd readable{progress[0], POLLIN, 0};
      const int ready = ::poll(&readable, 1, static_cast<int>(timeout.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        hung = true;
        ::kill(child, SIGKILL);
        break;
      }
      std::uint32_t index = 0;
      const ssize_t got = ::read(progress[0], &index, sizeof index);
      if (got < 0 && errno == EINTR) continue;
      if (got != sizeof index) break;
      loading = index;
    }
    ::close(progress[0]);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0)
      if (errno != EINTR) return verdicts;
    const bool died = hung || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (!died || loading < 0) break;  // every library loaded (or the child ended before the first)
    const auto culprit = static_cast<std::size_t>(loading);
    verdicts[culprit] = hung ? "hung while loading (more than " + std::to_string(timeout.count() / 1000) +
                                   " s in dlopen or its descriptor, in a probe process): remove it from the plugin "
                                   "path or rebuild it"
                             : "crashed the loader (" + ending_text(status) +
                                   " in dlopen or its descriptor, in a probe process): the library is corrupt; "
                                   "rebuild it or remove it from the plugin path";
    next = culprit + 1;
  }
  return verdicts;
}

}  // namespace strata
