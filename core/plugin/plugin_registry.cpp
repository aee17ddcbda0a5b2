#include "core/plugin/plugin_registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

namespace strata {

namespace {

std::string abi_text(std::uint32_t major, std::uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
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
    if (factory.name == nullptr || factory.create == nullptr || factory.destroy == nullptr ||
        factory.config_keys == nullptr)
      return "plugin '" + name + "': factory #" + std::to_string(i + 1) + " lacks a name, create, destroy or key list";
    if (static_cast<std::uint32_t>(factory.kind) > static_cast<std::uint32_t>(InterfaceKind::kernel))
      return "plugin '" + name + "': factory '" + factory.name + "' has an unknown interface kind";
  }
  return {};
}

}  // namespace

std::optional<std::string> PluginRegistry::load(const std::filesystem::path& path) {
  auto refuse = [&](std::string reason) -> std::optional<std::string> {
    failures_.push_back({path, reason});
    return reason;
  };
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->path = path;
  try {
    plugin->library = std::make_shared<boost::dll::shared_library>(
        path.string(), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    return refuse(std::string("cannot load: ") + e.what());
  }
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
    if (auto existing = find(factory.kind, factory.name))
      return refuse(std::string(interface_name(factory.kind)) + " '" + factory.name + "' is already provided by " +
                    existing->plugin->path.string());
  }
  plugins_.push_back(std::move(plugin));
  return std::nullopt;
}

void PluginRegistry::scan(const std::vector<std::filesystem::path>& directories) {
  std::set<std::filesystem::path> seen;
  for (const auto& directory : directories) {
    std::error_code error;
    if (!std::filesystem::is_directory(directory, error)) continue;
    searched_.push_back(directory);
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(directory, error))
      if (entry.is_regular_file() && entry.path().extension() == ".so") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const auto canonical = std::filesystem::weakly_canonical(file, error);
      if (!seen.insert(canonical).second) continue;
      load(file);
    }
  }
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

std::vector<std::filesystem::path> plugin_search_path(const std::vector<std::filesystem::path>& manifest_paths) {
  std::vector<std::filesystem::path> path = manifest_paths;
  if (const char* environment = std::getenv("STRATA_PLUGIN_PATH")) {
    std::stringstream stream(environment);
    for (std::string entry; std::getline(stream, entry, ':');)
      if (!entry.empty()) path.emplace_back(entry);
  }
  path.emplace_back(STRATA_BUILD_PLUGIN_DIR);
  path.emplace_back(STRATA_INSTALL_PLUGIN_DIR);
  return path;
}

}  // namespace strata
