// Fuzz target: the manifest parser (parse_manifest, the body of load_manifest) on arbitrary text.
// Leading comment lines "#set key.path=value" become --set overrides, so the fuzzer also drives
// apply_override into whatever document it made; TOML ignores them as comments. Bad input must
// end in ManifestError; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSetPrefix = "#set ";
  std::vector<std::string> overrides;
  for (std::size_t line = 0; line < text.size() && text.substr(line).starts_with(kSetPrefix);) {
    const std::size_t end = std::min(text.find('\n', line), text.size());
    overrides.emplace_back(text.substr(line + kSetPrefix.size(), end - line - kSetPrefix.size()));
    line = end + 1;
  }
  try {
    const strata::Manifest manifest = strata::parse_manifest(text, "fuzz.toml", overrides);
  } catch (const strata::ManifestError&) {
  }
  return 0;
}
