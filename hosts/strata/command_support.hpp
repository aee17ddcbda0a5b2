#pragma once
// What the commands share (commands.cpp): option parsing with --help and usage on error, the
// manifest options, the plugin search, and the mapping of each kind of failure to its message and
// exit code.
#include <boost/program_options.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/manifest/manifest.hpp"
#include "core/plugin/plugin_registry.hpp"

namespace strata {

struct CommonArguments {
  std::string manifest;
  std::vector<std::string> overrides;
};

// Parses a command's options; returns an exit code when the command should stop (help or error).
std::optional<int> parse(const std::string& name, const std::string& synopsis,
                         boost::program_options::options_description& options,
                         const std::vector<std::string>& arguments, boost::program_options::variables_map& values,
                         bool takes_manifest = true);
void add_manifest_options(boost::program_options::options_description& options, CommonArguments& common);
// The plugins on the manifest's search path; a library that fails to load is warned about by name.
PluginRegistry load_plugins(const Manifest& manifest);

// load_manifest, and a warning for each of the model's notes (what its config.json asks that
// Strata does not do).
Manifest load_command_manifest(const std::filesystem::path& path, const std::vector<std::string>& overrides,
                               ManifestUse use = ManifestUse::training);
// Runs a command body: invalid input (manifest, data, checkpoint) is exit 2, a failed run exit 1.
int run_guarded(const std::string& name, const std::function<int()>& body);

}  // namespace strata
