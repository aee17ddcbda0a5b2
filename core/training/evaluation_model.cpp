#include "core/training/evaluation_model.hpp"

#include <spdlog/spdlog.h>

#include "core/checkpoint/checkpoint.hpp"
#include "core/model/make_model.hpp"

namespace strata {

EvaluationModel open_for_evaluation(const Manifest& manifest, PluginRegistry& registry,
                                    const std::filesystem::path& checkpoint, const BackendFactory& backend) {
  configure_threads(manifest.train.threads);
  EvaluationModel run;
  run.device = backend ? backend(manifest) : backend_for(manifest);
  run.host = std::make_unique<HostServicesImpl>(manifest.model.info(), manifest.device.kind);
  run.stack = build_stack(manifest, registry, *run.host, "");
  run.host->use_backend(*run.device);
  run.model =
      make_model(manifest.model, *run.device, run.stack.attention_on(*run.device, manifest.model.attention_shape(1)),
                 ModelOptions{manifest.train.micro_batch_rows(),
                              {},
                              Allocation::now,
                              run.stack.storage_on(*run.device),
                              Purpose::evaluation,
                              run.stack.trainable});
  if (!run.stack.trainable.trains_everything()) {
    run.model->init_weights(manifest.train.seed);
    if (const auto base = manifest.starting_weights()) {
      load_weights(*base, *run.model);
      spdlog::info("base weights from {}", base->string());
    }
  }
  load_weights(checkpoint, *run.model);
  return run;
}

}  // namespace strata
