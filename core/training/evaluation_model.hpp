#pragma once
// A model built for evaluation (no gradients, optimizer state or backward workspace) holding a
// checkpoint's weights, with the plugins and backend it runs on: what `strata eval` and `strata
// export` read. Where the strategies freeze or adapt parameters, the checkpoint holds only the
// trained ones, so the run's own initialisation and base (train.seed, train.init_from) come first
// and the checkpoint's fingerprint of the frozen weights is checked against them.
#include <filesystem>
#include <memory>
#include <optional>

#include "core/device/backend.hpp"
#include "core/manifest/manifest.hpp"
#include "core/model/model.hpp"
#include "core/plugin/host_services_impl.hpp"
#include "core/plugin/plugin_registry.hpp"
#include "core/plugin/stack.hpp"
#include "core/training/training_run.hpp"

namespace strata {

// Members are destroyed in reverse order: the model before the plugins, the plugins before the
// host services and the backend they refer to.
struct EvaluationModel {
  std::unique_ptr<Backend> device;
  std::unique_ptr<HostServicesImpl> host;
  Stack stack;
  std::unique_ptr<Model> model;
};

// Throws as run_eval does (ManifestError, CheckpointError).
EvaluationModel open_for_evaluation(const Manifest& manifest, PluginRegistry& registry,
                                    const std::filesystem::path& checkpoint, const BackendFactory& backend = {});

// The same for decoding one sequence (batch 1, `strata generate`): a checkpoint's weights when one
// is given, else `weights` (a Hugging Face model directory or a safetensors file), else the
// manifest's starting weights ([model] from, train.init_from). Throws ManifestError when none is
// named.
EvaluationModel open_for_generation(const Manifest& manifest, PluginRegistry& registry,
                                    const std::optional<std::filesystem::path>& checkpoint,
                                    const std::optional<std::filesystem::path>& weights,
                                    const BackendFactory& backend = {});

}  // namespace strata
