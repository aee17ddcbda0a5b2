// The second list of model families (the first, core/model/model_families.cpp, holds what the
// formats read): each family's descriptor beside its model's constructor. A new family adds a line
// to each.
#include "core/model/make_model.hpp"

#include <array>
#include <stdexcept>
#include <utility>

#include "core/model/gemma/gemma_family.hpp"
#include "core/model/gemma/gemma_model.hpp"
#include "core/model/gpt2/gpt2_family.hpp"
#include "core/model/gpt2/gpt2_model.hpp"
#include "core/model/llama/llama_family.hpp"
#include "core/model/llama/llama_model.hpp"
#include "core/model/mistral/mistral_family.hpp"
#include "core/model/mistral/mistral_model.hpp"
#include "core/model/qwen2/qwen2_family.hpp"
#include "core/model/qwen2/qwen2_model.hpp"

namespace strata {

namespace {

using Build = std::unique_ptr<Model> (*)(const ModelShape&, Backend&, Kernel&, const ModelOptions&);

template <typename FamilyModel>
std::unique_ptr<Model> build(const ModelShape& shape, Backend& backend, Kernel& attention,
                             const ModelOptions& options) {
  return std::make_unique<FamilyModel>(shape, backend, attention, options);
}

std::unique_ptr<Model> build_gpt2(const ModelShape& shape, Backend& backend, Kernel& attention,
                                  const ModelOptions& options) {
  return std::make_unique<GPT2Model>(gpt2_config(shape), backend, attention, options);
}

}  // namespace

std::unique_ptr<Model> make_model(const ModelSpec& spec, Backend& backend, Kernel& attention,
                                  const ModelOptions& options) {
  static const std::array<std::pair<const ModelFamily*, Build>, 5> builders = {
      {{&gpt2_family(), &build_gpt2},
       {&llama_family(), &build<LlamaModel>},
       {&qwen2_family(), &build<Qwen2Model>},
       {&mistral_family(), &build<MistralModel>},
       {&gemma_family(), &build<GemmaModel>}}};
  const ModelFamily& family = spec.family();
  for (const auto& [described, make] : builders)
    if (described == &family) return make(spec.shape, backend, attention, options);
  throw std::logic_error("core/model/make_model.cpp lists no model for arch = \"" + spec.arch + "\"");
}

}  // namespace strata
