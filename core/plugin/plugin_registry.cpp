#include "core/plugin/plugin_registry.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/plugin/elf_check.hpp"
#include "core/plugin/library_probe.hpp"
#include "core/util/path_inside.hpp"

namespace strata {

namespace {

std::string abi_text(std::uint32_t major, std::uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Returns what is wrong with one of a factory's name lists, or empty. The list is counted, so a
// null entry is a mistake (often a leftover terminator), not the end.
std::string validate_name_list(const NameList& list, std::string_view what) {
  constexpr std::size_t kMaxNames = 1024;  // far above any real list: a larger count is garbage
  if (list.count == 0) return {};
  if (list.names == nullptr)
    return std::string(what) + " has a count of " + std::to_string(list.count) + " but no names";
  if (list.count > kMaxNames)
    return std::string(what) + " claims " + std::to_string(list.count) + " names (at most " +
           std::to_string(kMaxNames) + ")";
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < list.count; ++i) {
    const char* name = list.names[i];
    if (name == nullptr || *name == '\0')
      return std::string(what) + " entry #" + std::to_string(i + 1) +
             (name ? " is empty" : " is null (lists are counted: drop a trailing nullptr)");
    if (!seen.insert(name).second) return std::string(what) + " names '" + name + "' twice";
  }
  return {};
}

// Returns the reason a descriptor is unusable, or empty.
std::string validate_descriptor(const PluginDescriptor* descriptor) {
  const std::string host_abi = abi_text(kAbiMajor, kAbiMinor);
  if (descriptor == nullptr) return "its descriptor function returned null";
  const std::string name = descriptor->name != nullptr ? descriptor->name : "?";
  if (descriptor->abi_major != kAbiMajor || descriptor->abi_minor > kAbiMinor)
    return "plugin '" + name + "' was built for SDK ABI " + abi_text(descriptor->abi_major, descriptor->abi_minor) +
           "; this host speaks " + host_abi + " (the major must match and the minor be at most the host's)";
  if (descriptor->toolchain == nullptr || std::string_view(descriptor->toolchain) != STRATA_TOOLCHAIN_TAG)
    return "plugin '" + name + "' was built with toolchain '" +
           (descriptor->toolchain ? descriptor->toolchain : "(none)") + "'; this host was built with '" +
           STRATA_TOOLCHAIN_TAG + "' (C++ objects cross the boundary, so they must match)";
  if (descriptor->name == nullptr || descriptor->version == nullptr) return "its descriptor has no name or version";
  if (descriptor->factories == nullptr || descriptor->factory_count == 0)
    return "plugin '" + name + "' provides no factories";
  for (std::size_t i = 0; i < descriptor->factory_count; ++i) {
    const FactoryDescriptor& factory = descriptor->factories[i];
    if (factory.name == nullptr || factory.create == nullptr || factory.destroy == nullptr)
      return "plugin '" + name + "': factory #" + std::to_string(i + 1) + " lacks a name, create or destroy";
    if (static_cast<std::uint32_t>(factory.kind) > static_cast<std::uint32_t>(InterfaceKind::phase_controller))
      return "plugin '" + name + "': factory '" + factory.name + "' has an unknown interface kind";
    for (const auto& [list, what] : {std::pair{&factory.config_keys, "its config key list"},
                                     std::pair{&factory.requires_plugins, "its requires list"},
                                     std::pair{&factory.conflicts_with, "its conflicts list"}})
      if (std::string problem = validate_name_list(*list, what); !problem.empty())
        return "plugin '" + name + "': factory '" + factory.name + "': " + problem;
    for (const char* key : factory.config_keys)
      if (std::string_view(key) == "plugin")
        return "plugin '" + name + "': factory '" + factory.name +
               "' declares the key 'plugin', which every table has already";
  }
  return {};
}

}  // namespace

std::optional<std::string> PluginRegistry::load(const std::filesystem::path& path) {
  if (std::string reason = check_elf_library(path); !reason.empty()) {
    failures_.push_back({path, reason, false});
    return reason;
  }
  return load_probed(path, probe_libraries_in_child({path}).front());
}

std::optional<std::string> PluginRegistry::load_probed(const std::filesystem::path& path,
                                                       const std::string& probe_verdict, bool shipped) {
  auto refuse = [&](std::string reason, bool duplicate = false) -> std::optional<std::string> {
    failures_.push_back({path, reason, duplicate});
    return reason;
  };
  if (!probe_verdict.empty()) return refuse(probe_verdict);
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->path = path;
  plugin->shipped = shipped;
  try {
    plugin->library = std::make_shared<boost::dll::shared_library>(path.string(), plugin_load_mode());
  } catch (const std::exception& e) {
    return refuse(std::string("cannot load: ") + e.what());
  }
  // Mapped until the process ends, whatever the registry does: in test processes that make one
  // registry per run, every hang and fault seen at the first launch of a CUDA plugin's kernels
  // (H100, CUDA 13.0) followed an unload and a reload of that plugin, while `strata train`, which
  // loads it once, ran the same kernels. Asking again with RTLD_NOLOAD marks the loaded object.
  if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE); handle != nullptr) dlclose(handle);
  if (!plugin->library->has("strata_plugin"))
    return refuse("not a Strata plugin: it exports no 'strata_plugin' descriptor (STRATA_PLUGIN(...))");
  try {
    auto& describe = plugin->library->get_alias<const PluginDescriptor*() noexcept>("strata_plugin");
    plugin->descriptor = describe();
  } catch (const std::exception& e) {
    return refuse(std::string("cannot read its descriptor: ") + e.what());
  }
  if (std::string reason = validate_descriptor(plugin->descriptor); !reason.empty()) return refuse(reason);
  for (std::size_t i = 0; i < plugin->descriptor->factory_count; ++i) {
    const FactoryDescriptor& factory = plugin->descriptor->factories[i];
    if (auto existing = find(factory.kind, factory.name)) {
      if (existing->plugin->shipped && !shipped)
        return refuse("it provides " + std::string(interface_name(factory.kind)) + " '" + factory.name +
                      "', which Strata ships (" + existing->plugin->path.string() +
                      "): a library may not replace a shipped plugin; give yours another name");
      return refuse(std::string(interface_name(factory.kind)) + " '" + factory.name + "' is already provided by " +
                        existing->plugin->path.string(),
                    true);
    }
  }
  plugins_.push_back(std::move(plugin));
  return std::nullopt;
}

void PluginRegistry::scan(const std::vector<std::filesystem::path>& directories) {
  std::vector<PluginDirectory> users;
  for (const auto& directory : directories) users.push_back({directory, false});
  scan_search_path(users);
}

void PluginRegistry::scan_search_path(const std::vector<PluginDirectory>& search_path) {
  // The shipped directories first, so a shipped name is always the shipped plugin.
  std::vector<PluginDirectory> directories;
  for (const bool shipped : {true, false})
    for (const PluginDirectory& directory : search_path)
      if (directory.shipped == shipped) directories.push_back(directory);
  std::set<std::filesystem::path> seen;
  std::vector<std::pair<std::filesystem::path, bool>> sound;  // in that order: an earlier factory shadows a later one
  for (const auto& [directory, shipped] : directories) {
    std::error_code error;
    if (!std::filesystem::is_directory(directory, error)) continue;
    searched_.push_back(directory);
    // Every filesystem call takes an error_code: a symlink loop or an unreadable entry is a
    // failure to list under its path, never an exception that ends `strata plugins`.
    std::vector<std::filesystem::path> files;
    std::filesystem::directory_iterator entries(directory, error);
    if (error) {
      failures_.push_back({directory, "cannot list the directory: " + error.message(), false});
      continue;
    }
    for (const std::filesystem::directory_entry& entry : entries) {
      if (entry.path().extension() != ".so") continue;
      std::error_code status_error;
      const bool regular = entry.is_regular_file(status_error);
      if (status_error == std::errc::no_such_file_or_directory)
        failures_.push_back({entry.path(), "a symlink to nothing (dangling)", false});
      else if (status_error == std::errc::too_many_symbolic_link_levels)
        failures_.push_back({entry.path(), "cannot read: " + status_error.message() + " (a symlink loop)", false});
      else if (status_error)
        failures_.push_back({entry.path(), "cannot read: " + status_error.message(), false});
      else if (!regular)
        failures_.push_back({entry.path(), "not a regular file", false});
      else
        files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const auto canonical = std::filesystem::weakly_canonical(file, error);
      if (!seen.insert(error ? file : canonical).second) continue;
      if (std::string reason = check_elf_library(file); !reason.empty())
        failures_.push_back({file, reason, false});
      else
        sound.emplace_back(file, shipped);
    }
  }
  std::vector<std::filesystem::path> files;
  for (const auto& [file, shipped] : sound) files.push_back(file);
  const std::vector<std::string> verdicts = probe_libraries_in_child(files);
  for (std::size_t i = 0; i < sound.size(); ++i) load_probed(sound[i].first, verdicts[i], sound[i].second);
}

std::optional<FactoryRef> PluginRegistry::find(InterfaceKind kind, std::string_view name) const {
  for (const auto& plugin : plugins_)
    for (std::size_t i = 0; i < plugin->descriptor->factory_count; ++i) {
      const FactoryDescriptor& factory = plugin->descriptor->factories[i];
      if (factory.kind == kind && name == factory.name) return FactoryRef{plugin.get(), &factory};
    }
  return std::nullopt;
}

std::vector<std::string> PluginRegistry::names(InterfaceKind kind) const {
  std::vector<std::string> names;
  for (const auto& plugin : plugins_)
    for (std::size_t i = 0; i < plugin->descriptor->factory_count; ++i)
      if (plugin->descriptor->factories[i].kind == kind) names.emplace_back(plugin->descriptor->factories[i].name);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<PluginDirectory> plugin_search_path(const std::vector<std::filesystem::path>& manifest_paths) {
  std::vector<PluginDirectory> path;
  for (const auto& directory : manifest_paths) path.push_back({directory, false});
  if (const char* environment = std::getenv("STRATA_PLUGIN_PATH")) {
    std::stringstream stream(environment);
    for (std::string entry; std::getline(stream, entry, ':');)
      if (!entry.empty()) path.push_back({entry, false});
  }
  // Then the plugins installed beside this program (<prefix>/lib/strata/plugins, wherever
  // `cmake --install --prefix` put it), the build tree's for a program inside the build tree,
  // and the prefix configured at build time. Directories that do not exist are skipped.
  std::error_code error;
  const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) path.push_back({(executable.parent_path() / STRATA_PLUGIN_DIR_FROM_BINDIR).lexically_normal(), true});
  if (!error && path_is_inside(executable, STRATA_BINARY_DIR)) path.push_back({STRATA_BUILD_PLUGIN_DIR, true});
  if (std::none_of(path.begin(), path.end(), [](const PluginDirectory& directory) {
        return directory.path == std::filesystem::path(STRATA_INSTALL_PLUGIN_DIR);
      }))
    path.push_back({STRATA_INSTALL_PLUGIN_DIR, true});
  return path;
}

}  // namespace strata
