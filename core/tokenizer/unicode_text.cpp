#include "core/tokenizer/unicode_text.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/ucasemap.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>
#include <unicode/uversion.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>

#include "core/tokenizer/tokenizer.hpp"

namespace strata {

namespace {

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::int32_t icu_length(std::string_view text, const char* what) {
  if (text.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw TokenizerError(std::string(what) + ": a stretch of text over 2 GiB between added tokens");
  return static_cast<std::int32_t>(text.size());
}

[[noreturn]] void fail(const char* what, UErrorCode status) {
  throw TokenizerError(std::string(what) + " failed: " + u_errorName(status));
}

const icu::Normalizer2* normalizer_of(UnicodeForm form, UErrorCode& status) {
  switch (form) {
    case UnicodeForm::nfc: return icu::Normalizer2::getNFCInstance(status);  // ICU's own, never freed
    case UnicodeForm::nfd: return icu::Normalizer2::getNFDInstance(status);
    case UnicodeForm::nfkc: return icu::Normalizer2::getNFKCInstance(status);
    case UnicodeForm::nfkd: return icu::Normalizer2::getNFKDInstance(status);
  }
  return nullptr;
}

void append_code_point(std::string& out, UChar32 code) {
  char spelled[16];
  std::snprintf(spelled, sizeof spelled, "\\x{%X}", static_cast<unsigned>(code));
  out += spelled;
}

}  // namespace

std::string icu_unicode_version() {
  UVersionInfo version{};
  u_getUnicodeVersion(version);
  return std::to_string(version[0]) + "." + std::to_string(version[1]);
}

bool to_unicode_form(std::string_view text, UnicodeForm form, std::string& out) {
  if (is_ascii(text)) return false;
  const char* what = "Unicode normalization";
  const std::int32_t length = icu_length(text, what);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = normalizer_of(form, status);
  if (U_FAILURE(status)) fail(what, status);
  const icu::StringPiece source(text.data(), length);
  const bool normalized = normalizer->isNormalizedUTF8(source, status);
  if (U_FAILURE(status)) fail(what, status);
  if (normalized) return false;
  out.clear();
  icu::StringByteSink<std::string> sink(&out, length);
  normalizer->normalizeUTF8(0, source, sink, nullptr, status);
  if (U_FAILURE(status)) fail(what, status);
  return true;
}

bool to_lower_case(std::string_view text, std::string& out) {
  if (is_ascii(text)) {
    if (std::none_of(text.begin(), text.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) return false;
    out.assign(text);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return true;
  }
  const char* what = "lower case";
  const std::int32_t length = icu_length(text, what);
  UErrorCode status = U_ZERO_ERROR;
  const std::unique_ptr<UCaseMap, decltype(&ucasemap_close)> map(ucasemap_open("", 0, &status), &ucasemap_close);
  if (U_FAILURE(status)) fail(what, status);
  out.resize(text.size() + 16);
  for (int attempt = 0; attempt < 2; ++attempt) {
    status = U_ZERO_ERROR;
    const std::int32_t written = ucasemap_utf8ToLower(map.get(), out.data(), static_cast<std::int32_t>(out.size()),
                                                      text.data(), length, &status);
    if (status == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(static_cast<std::size_t>(written));
      continue;
    }
    if (U_FAILURE(status)) fail(what, status);
    out.resize(static_cast<std::size_t>(written));
    return out != text;
  }
  fail(what, U_BUFFER_OVERFLOW_ERROR);
}

bool is_white_space(char32_t character) {
  return u_hasBinaryProperty(static_cast<UChar32>(character), UCHAR_WHITE_SPACE) != 0;
}

std::string class_body(std::string_view icu_set, bool negated) {
  const icu::UnicodeString spelled =
      icu::UnicodeString::fromUTF8(icu::StringPiece(icu_set.data(), static_cast<std::int32_t>(icu_set.size())));
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeSet set(spelled, status);
  if (U_FAILURE(status))
    throw std::invalid_argument(std::string(icu_set) + " is not a Unicode set ICU can read (" + u_errorName(status) +
                                ")");
  if (negated) set.complement();
  set.remove(0xD800, 0xDFFF);  // not characters: PCRE2 refuses them in UTF mode
  std::string body;
  for (std::int32_t i = 0; i < set.getRangeCount(); ++i) {
    const UChar32 first = set.getRangeStart(i);
    const UChar32 last = set.getRangeEnd(i);
    append_code_point(body, first);
    if (last != first) {
      body += '-';
      append_code_point(body, last);
    }
  }
  return body;
}

}  // namespace strata
