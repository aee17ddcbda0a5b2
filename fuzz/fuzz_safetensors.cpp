// Fuzz target: the safetensors reader (SafetensorsFile::parse, the body of SafetensorsFile::read)
// on arbitrary bytes, then every tensor it accepted converted to f32 as a checkpoint load does.
// Bad input must end in CheckpointError; anything else (a crash, a sanitizer report, another
// exception, std::bad_alloc from a size field) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/checkpoint/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  try {
    const strata::SafetensorsFile file = strata::SafetensorsFile::parse(bytes, "fuzz.safetensors");
    for (const auto& [name, entry] : file.entries()) {
      try {
        const std::vector<float> values = file.tensor(name, entry.shape);
      } catch (const strata::CheckpointError&) {  // a dtype Strata does not read
      }
    }
  } catch (const strata::CheckpointError&) {
  }
  return 0;
}
