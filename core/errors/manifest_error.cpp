#include "core/errors/manifest_error.hpp"

namespace strata {

namespace {
std::string join(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems) text += (text.empty() ? "" : "\n") + problem;
  return text;
}
}  // namespace

ManifestError::ManifestError(const std::vector<std::string>& problems)
    : std::runtime_error(join(problems)), problems_(problems) {}

}  // namespace strata
