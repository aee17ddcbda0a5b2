// Fuzz target: the SentencePiece reader (read_sentencepiece_model: libsentencepiece's
// LoadFromSerializedProto and Strata's checks after it) on arbitrary bytes, then a fixed text
// encoded and decoded. Bad input must end in TokenizerError; anything else (a crash, an abort in
// the library, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view model(reinterpret_cast<const char*>(data), size);
  try {
    const auto tokenizer = strata::read_sentencepiece_model(model, "", "fuzz");
    const auto ids = tokenizer->encode("Hello world. 2024 \xC3\xA9\xE4\xB8\xAD\n  x");
    (void)tokenizer->decode(ids);
  } catch (const strata::TokenizerError&) {
  }
  return 0;
}
