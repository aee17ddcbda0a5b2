// Fuzz target: the tokenizer.json reader (read_tokenizer_json, the body of load_tokenizer) on
// arbitrary bytes, then, for a file it accepts, a fixed text with added-token strings, Unicode,
// invalid UTF-8 and whitespace runs encoded and decoded. The first byte splits the input: that
// many bytes (0-255) become tokenizer_config.json, the rest tokenizer.json. Bad input must end in
// TokenizerError; anything else (a crash, a sanitizer report, another exception, std::bad_alloc
// from an id) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t config_size = std::min<std::size_t>(data[0], size - 1);
  const std::string_view config(reinterpret_cast<const char*>(data) + 1, config_size);
  const std::string_view json(reinterpret_cast<const char*>(data) + 1 + config_size, size - 1 - config_size);
  try {
    const auto tokenizer = strata::read_tokenizer_json(json, config, "fuzz");
    for (const std::string_view text :
         {std::string_view("Hello, world!  It's 2024 \xC3\xA9\xE4\xB8\xAD <|endoftext|>\n\n x"),
          std::string_view("\xC3(bad")}) {
      try {
        const auto ids = tokenizer->encode(text);
        (void)tokenizer->decode(ids);
      } catch (const strata::TokenizerError&) {
      }
    }
  } catch (const strata::TokenizerError&) {
  }
  return 0;
}
