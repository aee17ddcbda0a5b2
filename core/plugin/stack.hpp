#pragma once
// A strategy stack: the plugin objects a manifest composes. Each object is held by a shared_ptr
// whose deleter calls the plugin's destroy function and keeps its library loaded, so no object can
// outlive the code that implements it.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/manifest/manifest.hpp"
#include "core/model/model.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "strata/plugin.hpp"

namespace strata {

struct Stack {
  std::shared_ptr<Optimizer> optimizer;
  std::shared_ptr<PrecisionPolicy> precision;
  std::vector<std::shared_ptr<MemoryStrategy>> strategies;
  std::vector<std::string> strategy_labels;  // parallel: "[[strategy]] #1 'checkpoint'"
  std::vector<std::shared_ptr<TelemetrySink>> telemetry;
  std::shared_ptr<PhaseController> predictor;  // null without a [predictor] table
  // The manifest's attention kernel: null for the default ("fast"), which is the backend's own
  // attention op; "reference" or a kernel plugin otherwise. attention_on() picks for a backend.
  std::shared_ptr<Kernel> attention;
  std::string attention_name = "fast";
  // The kernel is CUDA's default (flash_bf16 for bf16 activations), not the manifest's: a GPU that
  // cannot run it falls back to the backend's own instead of refusing the run.
  bool attention_is_default = false;
  std::string manifest_path;
  std::string description;     // "adamw + fp32 + checkpoint"
  std::string precision_name;  // the [precision] plugin's name
  // What trains, as the strategies planned it (plan_parameters): the model is built with it.
  TrainablePlan trainable;
  // Worth a warning, not a refusal: keys the manifest sets that the plugin declares but never read.
  std::vector<std::string> warnings;

  std::vector<MemoryStrategy*> strategy_pointers() const;
  // The kernel the model calls on `backend`, bound to it. A kernel that cannot run `shape` there
  // (the CPU reference on a GPU, a plugin without that backend's kernels) is refused with
  // ManifestError carrying the kernel's reason.
  Kernel& attention_on(Backend& backend, const AttentionShape& shape);
  // The precision policy's storage dtypes, with its weight quantizer (if any) checked against and
  // bound to `backend` (ManifestError when it cannot run there).
  StorageTypes storage_on(Backend& backend);
};

// Resolves every plugin named in the manifest, checks requirements and conflicts, and creates
// each object with its own table. Throws ManifestError naming the file, key and plugin. Each
// object is wrapped (guarded_plugins.hpp) so its failures and exceptions name it.
// With no [[telemetry]] table, `default_telemetry` is used ("console"). Each plugin is created with
// host.for_plugin(its name), so the memory it asks for is accounted under that name.
// Warnings (stack.warnings) are also logged.
// check_model_shape false (validate, when [model] keys were refused) resolves the plugins and
// checks their requirements and conflicts only: creating them reads their keys against the model
// (n_layer ranges, adapter targets, the quantizer's scale groups, the attention kernel's shape),
// which would then be the defaults the user never wrote.
Stack build_stack(const Manifest& manifest, PluginRegistry& registry, HostServicesImpl& host,
                  const std::string& default_telemetry = "console", bool check_model_shape = true);

// What creating a factory's object from an empty table (every key at its default) shows about its
// descriptor: declared keys it never reads (or asks about with has()), and problems such as a read
// of an undeclared key. Nothing when it cannot be created without keys.
struct DefaultsCheck {
  std::vector<std::string> unread_keys;
  std::vector<std::string> problems;
};
std::optional<DefaultsCheck> check_with_defaults(const FactoryRef& factory, HostServices& host);

}  // namespace strata
