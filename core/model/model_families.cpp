// The one list of model families (core/model/model_family.hpp), in the order messages name them. A
// new family is a folder and a line here (and one in make_model.cpp). A checkpoint a model's family
// does not recognize is named by the first family here that does: LLaMA before Mistral and Gemma,
// whose files hold the same names.
#include <array>
#include <stdexcept>

#include "core/model/gemma/gemma_family.hpp"
#include "core/model/gpt2/gpt2_family.hpp"
#include "core/model/llama/llama_family.hpp"
#include "core/model/mistral/mistral_family.hpp"
#include "core/model/model_family.hpp"
#include "core/model/qwen2/qwen2_family.hpp"

namespace strata {

std::span<const ModelFamily* const> model_families() {
  static const std::array<const ModelFamily*, 5> families = {&gpt2_family(), &llama_family(), &qwen2_family(),
                                                             &mistral_family(), &gemma_family()};
  return families;
}

std::int64_t ParameterTensor::elements() const {
  std::int64_t count = 1;
  for (const std::int64_t extent : shape) count *= extent;
  return count;
}

std::int64_t ModelFamily::parameter_count(const ModelShape& shape) const {
  std::int64_t count = 0;
  for (const ParameterTensor& tensor : parameter_tensors(shape)) count += tensor.elements();
  return count;
}

const ModelFamily* find_model_family(std::string_view arch) {
  for (const ModelFamily* family : model_families())
    if (family->arch() == arch) return family;
  return nullptr;
}

const ModelFamily& model_family(std::string_view arch) {
  if (const ModelFamily* family = find_model_family(arch)) return *family;
  throw std::invalid_argument("no model family is called '" + std::string(arch) + "' (" + model_family_names() + ")");
}

std::string model_family_names(std::string_view last_separator) {
  const auto families = model_families();
  std::string names;
  for (std::size_t i = 0; i < families.size(); ++i) {
    if (i > 0) names += i + 1 == families.size() ? std::string(last_separator) : std::string(", ");
    names += families[i]->arch();
  }
  return names;
}

}  // namespace strata
