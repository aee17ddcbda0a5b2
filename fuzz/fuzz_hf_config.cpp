// Fuzz target: a Hugging Face config.json read into Strata's [model] terms (parse_hf_config, the
// body of read_hf_config) on arbitrary bytes. Bad input must end in ManifestError; anything else
// (a crash, a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/checkpoint/hf_directory.hpp"
#include "core/errors/manifest_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)strata::parse_hf_config(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  } catch (const strata::ManifestError&) {
  }
  return 0;
}
