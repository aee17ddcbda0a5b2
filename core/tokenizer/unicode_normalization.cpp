#include "core/tokenizer/unicode_normalization.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <algorithm>
#include <limits>

#include "core/tokenizer/tokenizer.hpp"

namespace strata {

bool to_nfc(std::string_view text, std::string& out) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return false;
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw TokenizerError("NFC normalization: a stretch of text over 2 GiB between added tokens");
  const auto fail = [](UErrorCode status) {
    throw TokenizerError(std::string("NFC normalization failed: ") + u_errorName(status));
  };
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);  // ICU's own, never freed
  if (U_FAILURE(status)) fail(status);
  const icu::StringPiece source(text.data(), static_cast<std::int32_t>(text.size()));
  const bool normalized = nfc->isNormalizedUTF8(source, status);
  if (U_FAILURE(status)) fail(status);
  if (normalized) return false;
  out.clear();
  icu::StringByteSink<std::string> sink(&out, static_cast<std::int32_t>(text.size()));
  nfc->normalizeUTF8(0, source, sink, nullptr, status);
  if (U_FAILURE(status)) fail(status);
  return true;
}

}  // namespace strata
