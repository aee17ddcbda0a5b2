// Fuzz target: model.safetensors.index.json's weight map (parse_hf_index, read by
// open_hf_weights) on arbitrary bytes. Bad input must end in CheckpointError; anything else (a
// crash, a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/checkpoint/hf_directory.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)strata::parse_hf_index(std::string_view(reinterpret_cast<const char*>(data), size),
                                 "model.safetensors.index.json");
  } catch (const strata::CheckpointError&) {
  }
  return 0;
}
