// The executor's side of activation codecs (strata/activation_codec.hpp): codes made after a
// block's forward, before its after_forward hooks, and values made back before its backward, after
// its before_backward hooks; a codec's error stops the run naming the strategy, the call, the layer
// and the step.
#include "core/executor/executor.hpp"
#include "core/executor/hook_failed.hpp"

namespace strata {

namespace {

CodecCall codec_call(const Model& model, std::int64_t step, int micro_batch, int layer) {
  return {step, micro_batch, layer, model.kernel_call(layer, true).sequence};
}

}  // namespace

std::string Executor::strategy_label(int strategy) const {
  return strategy >= 0 && strategy < static_cast<int>(options_.strategy_labels.size())
             ? options_.strategy_labels[static_cast<std::size_t>(strategy)]
             : "strategy #" + std::to_string(strategy + 1);
}

void Executor::encode_activations(int layer) {
  if (!model_.codes_activations()) return;
  if (const std::optional<CodecFailure> failure =
          model_.encode_activations(layer, codec_call(model_, step_, micro_batch_, layer)))
    throw HookFailed(strategy_label(failure->strategy) + " failed in " + std::string(failure->call) + " (layer " +
                     std::to_string(layer) + ", step " + std::to_string(step_) + "): " + failure->message);
}

void Executor::restore_activations(int layer) {
  TensorStore& store = model_.store();
  store.residency().bring_to_device(model_.layer_held_rows(layer));
  if (layer > 0) store.residency().bring_to_device({model_.layer_output_row(layer - 1)});
  if (!model_.codes_activations()) return;
  if (const std::optional<CodecFailure> failure =
          model_.decode_activations(layer, codec_call(model_, step_, micro_batch_, layer)))
    throw HookFailed(strategy_label(failure->strategy) + " failed in " + std::string(failure->call) + " (layer " +
                     std::to_string(layer) + ", step " + std::to_string(step_) + "): " + failure->message);
}

}  // namespace strata
