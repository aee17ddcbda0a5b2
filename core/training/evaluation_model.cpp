#include "core/training/evaluation_model.hpp"

#include <spdlog/spdlog.h>

#include "core/checkpoint/checkpoint.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/model/make_model.hpp"

namespace strata {

namespace {

EvaluationModel open_model(const Manifest& manifest, PluginRegistry& registry, int batch,
                           const std::optional<std::filesystem::path>& checkpoint,
                           const std::optional<std::filesystem::path>& weights, const BackendFactory& backend) {
  configure_threads(manifest.train.threads);
  EvaluationModel run;
  run.device = backend ? backend(manifest) : backend_for(manifest);
  run.host = std::make_unique<HostServicesImpl>(manifest.model.info(), manifest.device.kind);
  run.stack = build_stack(manifest, registry, *run.host, "");
  run.host->use_backend(*run.device);
  run.model = make_model(
      manifest.model, *run.device, run.stack.attention_on(*run.device, manifest.model.attention_shape(batch)),
      ModelOptions{
          batch, {}, Allocation::now, run.stack.storage_on(*run.device), Purpose::evaluation, run.stack.trainable});
  // A checkpoint of frozen or adapted parameters holds only the trained ones: the run's own
  // initialisation and base come first.
  if (!checkpoint || !run.stack.trainable.trains_everything()) {
    const auto base = weights ? weights : manifest.starting_weights();
    initialise_before(*run.model, manifest.train.seed, base);
    if (base) {
      load_weights(*base, *run.model);
      spdlog::info("base weights from {}", base->string());
    }
  }
  if (checkpoint) load_weights(*checkpoint, *run.model);
  return run;
}

}  // namespace

EvaluationModel open_for_evaluation(const Manifest& manifest, PluginRegistry& registry,
                                    const std::filesystem::path& checkpoint, const BackendFactory& backend) {
  return open_model(manifest, registry, manifest.train.micro_batch_rows(), checkpoint, std::nullopt, backend);
}

EvaluationModel open_for_generation(const Manifest& manifest, PluginRegistry& registry,
                                    const std::optional<std::filesystem::path>& checkpoint,
                                    const std::optional<std::filesystem::path>& weights,
                                    const BackendFactory& backend) {
  if (!checkpoint && !weights && !manifest.starting_weights())
    throw ManifestError(manifest.path.string() +
                        ": no weights to generate with: give --checkpoint DIR (a trained run) or --from DIR (a "
                        "Hugging Face model directory), or set [model] from");
  return open_model(manifest, registry, 1, checkpoint, weights, backend);
}

}  // namespace strata
