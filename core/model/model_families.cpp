// The one list of model families (core/model/model_family.hpp). A new family is a folder and a line
// here. Checkpoints are recognized in this order: a family that is another with more tensors
// (Qwen2: LLaMA's names plus q/k/v biases) comes before it.
#include <array>
#include <stdexcept>

#include "core/model/gpt2/gpt2_family.hpp"
#include "core/model/llama/llama_family.hpp"
#include "core/model/model_family.hpp"
#include "core/model/qwen2/qwen2_family.hpp"

namespace strata {

std::span<const ModelFamily* const> model_families() {
  static const std::array<const ModelFamily*, 3> families = {&qwen2_family(), &llama_family(), &gpt2_family()};
  return families;
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

// In the order users meet them: gpt2 first.
std::string model_family_names(std::string_view last_separator) {
  const auto families = model_families();
  std::string names;
  for (std::size_t i = families.size(); i-- > 0;) {
    if (!names.empty()) names += i == 0 ? std::string(last_separator) : std::string(", ");
    names += families[i]->arch();
  }
  return names;
}

}  // namespace strata
