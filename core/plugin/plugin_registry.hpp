#pragma once
// Finds plugin libraries on a search path, loads them with immediate binding (a missing symbol
// fails at load, not mid-step), validates their descriptors and keeps every library loaded for as
// long as any object it made is alive, and a library it loaded stays mapped for the rest of the
// process (RTLD_NODELETE): a CUDA plugin's kernels are registered with the CUDA runtime once per
// process, never unregistered and registered again at the same address by a second registry.
// Failures are values: the path and the reason.
//
// This registry is the one piece of process-wide mutable state the host owns, and it is an object,
// not a global: `strata` makes one per run.
#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/plugin.hpp"

namespace strata {

struct LoadedPlugin {
  std::filesystem::path path;
  std::shared_ptr<boost::dll::shared_library> library;
  const PluginDescriptor* descriptor = nullptr;
  bool shipped = false;  // from a directory Strata installs or builds its own plugins into
};

struct LoadFailure {
  std::filesystem::path path;
  std::string reason;
  bool duplicate = false;  // a sound library whose factories an earlier one on the user's path provides
};

// A directory plugins are searched in: the user's (a manifest's plugin_path, STRATA_PLUGIN_PATH)
// or one Strata ships its own plugins in (beside the program, the build tree, the install prefix).
struct PluginDirectory {
  std::filesystem::path path;
  bool shipped = false;
};

struct FactoryRef {
  const LoadedPlugin* plugin = nullptr;
  const FactoryDescriptor* factory = nullptr;
};

class PluginRegistry {
 public:
  // Loads every *.so in each directory: the shipped directories' first, then the user's in order. A
  // user's library that provides a name a shipped plugin provides is refused, named (it would
  // otherwise replace a built-in without a word); among the user's, a name seen earlier shadows a
  // later one.
  void scan_search_path(const std::vector<PluginDirectory>& directories);
  // Every directory a user's.
  void scan(const std::vector<std::filesystem::path>& directories);
  // Loads one library (checked, then probed in a child process first). Returns the reason when it
  // is refused.
  std::optional<std::string> load(const std::filesystem::path& path);

  std::optional<FactoryRef> find(InterfaceKind kind, std::string_view name) const;
  std::vector<std::string> names(InterfaceKind kind) const;
  const std::vector<std::unique_ptr<LoadedPlugin>>& plugins() const noexcept { return plugins_; }
  const std::vector<LoadFailure>& failures() const noexcept { return failures_; }
  const std::vector<std::filesystem::path>& searched() const noexcept { return searched_; }

 private:
  // Loads a library the ELF check passed, given what loading it in a probe process showed.
  std::optional<std::string> load_probed(const std::filesystem::path& path, const std::string& probe_verdict,
                                         bool shipped = false);

  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  std::vector<LoadFailure> failures_;
  std::vector<std::filesystem::path> searched_;
};

// Manifest plugin_path, then STRATA_PLUGIN_PATH (':'-separated): the user's; then, shipped,
// <prefix>/lib/strata/plugins beside the running program, the build tree's plugins (for a program
// inside the build tree), and the install prefix configured at build time.
std::vector<PluginDirectory> plugin_search_path(const std::vector<std::filesystem::path>& manifest_paths);

}  // namespace strata
