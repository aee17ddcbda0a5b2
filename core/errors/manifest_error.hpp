#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace strata {

// Invalid input in a manifest, a --set override or a plugin's table. Carries every problem found,
// one per line, each starting with file:line:column.
class ManifestError : public std::runtime_error {
 public:
  explicit ManifestError(const std::vector<std::string>& problems);
  explicit ManifestError(const std::string& problem) : ManifestError(std::vector<std::string>{problem}) {}
  const std::vector<std::string>& problems() const noexcept { return problems_; }

 private:
  std::vector<std::string> problems_;
};

}  // namespace strata
