#include "core/model/make_model.hpp"

#include "core/model/gpt2/gpt2_model.hpp"
#include "core/model/llama/llama_model.hpp"
#include "core/model/qwen2/qwen2_model.hpp"

namespace strata {

std::unique_ptr<Model> make_model(const ModelSpec& spec, Backend& backend, Kernel& attention,
                                  const ModelOptions& options) {
  if (spec.arch == "qwen2") return std::make_unique<Qwen2Model>(spec.llama, backend, attention, options);
  if (spec.is_llama()) return std::make_unique<LlamaModel>(spec.llama, backend, attention, options);
  return std::make_unique<GPT2Model>(spec.gpt2, backend, attention, options);
}

}  // namespace strata
