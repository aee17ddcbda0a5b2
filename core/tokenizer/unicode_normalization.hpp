#pragma once
// Unicode NFC (canonical composition), the normalizer Qwen2's tokenizer.json names, through ICU.
#include <string>
#include <string_view>

namespace strata {

// When `text` (valid UTF-8) is not already in NFC, sets `out` to its NFC form and returns true;
// returns false, leaving `out` alone, when it is (ASCII always is, and is answered without ICU).
bool to_nfc(std::string_view text, std::string& out);

}  // namespace strata
