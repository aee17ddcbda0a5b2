// Fuzz target: the token-file reader (parse_tokens, the body of load_tokens) on arbitrary bytes,
// read both as an llm.c .bin file (vocab 70000: above uint16, so the vocabulary check bites on
// version 2 files) and as text with the byte tokenizer. Bad input must end in DataError;
// anything else (a crash, a sanitizer report, another exception, std::bad_alloc from the token
// count) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/data/token_file.hpp"
#include "core/errors/data_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<std::uint32_t> tokens = strata::parse_tokens(bytes, "fuzz.bin", 70000);
  } catch (const strata::DataError&) {
  }
  try {
    const std::vector<std::uint32_t> tokens = strata::parse_tokens(bytes, "fuzz.txt", 256);
  } catch (const strata::DataError&) {
  }
  return 0;
}
