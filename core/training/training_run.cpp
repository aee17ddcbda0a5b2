// `strata train` as a recipe: the set-up, then the loop, each line of it one part of a step
// (docs/architecture.md, "The step"). core/training/training_session.hpp holds the parts.
#include "core/training/training_run.hpp"

#include "core/data/corpus_tokens.hpp"
#include "core/data/token_file.hpp"
#include "core/errors/data_error.hpp"
#include "core/executor/executor.hpp"
#include "core/training/evaluation_model.hpp"
#include "core/training/run_inputs.hpp"
#include "core/training/training_session.hpp"

namespace strata {

TrainResult run_training(const Manifest& manifest, PluginRegistry& registry, const TrainOptions& options) {
  // Ranks, threads, device, stack, data, outputs; the model placed and initialised; a resume.
  TrainingSession run(manifest, registry, options);
  if (!run.nothing_to_train().empty()) {  // nothing is written: no telemetry, no save, no prune
    TrainResult finished;
    finished.nothing_to_train = run.nothing_to_train();
    return finished;
  }
  run.begin();
  for (std::int64_t step = run.first_step(); step <= run.last_step(); ++step) {
    run.take_batch(step);
    StepRecord record = run.step(step);  // forward, backward and update (core/executor/executor.cpp)
    run.evaluate_if_due(record);
    run.report(record);  // throws when the loss has diverged, after the sinks have the step
    run.sample_if_due(step);
    const bool stopping = run.stop_requested();  // SIGINT or SIGTERM, on any rank
    run.save_if_due(record);
    if (stopping) {
      run.log_stop(step);
      break;
    }
  }
  return run.finish();
}

double run_eval(const Manifest& manifest, PluginRegistry& registry, const std::filesystem::path& checkpoint,
                const std::optional<std::filesystem::path>& data, const BackendFactory& backend) {
  EvaluationModel run = open_for_evaluation(manifest, registry, checkpoint, backend);
  Model& model = *run.model;
  Backend* device = run.device.get();
  Stack& stack = run.stack;
  Executor executor(model, *stack.optimizer, *stack.precision, {}, {});
  const int seq_len = manifest.model.seq_len();
  if (data) {
    const auto tokenizer = tokenizer_for(manifest);
    const TokenSequence tokens = load_corpus_tokens(*data, manifest.model.vocab(), tokenizer.get());
    const std::int64_t windows = window_count(tokens, seq_len);
    if (windows < 1)
      throw DataError(data->string() + ": " + std::to_string(tokens.size()) +
                      " tokens, fewer than one window of seq_len + 1 = " + std::to_string(seq_len + 1));
    const double loss = mean_window_loss(
        executor, windows, manifest.train.micro_batch_rows(), seq_len,
        [&](std::int64_t w, std::int32_t* in, std::int32_t* out) { window_at(tokens, seq_len, w, in, out); });
    device->synchronize();  // an op's failure surfaces as itself, not as a NaN loss
    return loss;
  }
  const auto tokenizer = tokenizer_for(manifest);
  const double loss = validation_loss(executor, Dataset(data_options(manifest, tokenizer.get())), manifest);
  device->synchronize();
  return loss;
}

}  // namespace strata
