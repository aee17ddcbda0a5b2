#include "core/model/qwen2/qwen2_model.hpp"

#include <stdexcept>

namespace strata {

namespace {

LlamaConfig checked(const LlamaConfig& config) {
  if (!config.attention_bias)
    throw std::invalid_argument("a Qwen2 model needs its LlamaConfig made by apply_qwen2 (q/k/v biases)");
  return config;
}

}  // namespace

Qwen2Model::Qwen2Model(const LlamaConfig& config, Backend& backend, Kernel& attention, const ModelOptions& options)
    : LlamaModel(checked(config), backend, attention, options) {}

}  // namespace strata
