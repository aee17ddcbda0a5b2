#include "core/tokenizer/text_normalizer.hpp"

#include <algorithm>

#include "core/tokenizer/tokenizer_json_support.hpp"

namespace strata {

namespace {

using Json = nlohmann::json;
using tokenizer_json::character_at;
using tokenizer_json::character_length;
using tokenizer_json::type_of;

// The first character's end that is not White_Space, from the left; or, from the right, the end of
// the last character that is not.
std::size_t leading_space(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t length = character_length(static_cast<unsigned char>(text[i]));
    if (!is_white_space(character_at(text, i, length))) break;
    i += length;
  }
  return i;
}

std::size_t end_without_trailing_space(std::string_view text) {
  std::size_t end = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = character_length(static_cast<unsigned char>(text[i]));
    if (!is_white_space(character_at(text, i, length))) end = i + length;
    i += length;
  }
  return end;
}

// A Replace or Split pattern: {"String": literal} or {"Regex": pattern}.
void read_pattern(const Json& pattern, const std::string& field, std::string& literal,
                  std::unique_ptr<PretokenizerRegex>& regex) {
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string())
    regex = std::make_unique<PretokenizerRegex>(pattern["Regex"].get<std::string>(), field);
  else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string())
    literal = pattern["String"].get<std::string>();
  else
    throw TokenizerError(field + ": pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
}

}  // namespace

TextNormalizer::TextNormalizer(const Json& normalizer, const std::string& where) {
  if (!normalizer.is_null()) read(normalizer, where, "normalizer");
}

TextNormalizer::~TextNormalizer() = default;
TextNormalizer::TextNormalizer(TextNormalizer&&) noexcept = default;
TextNormalizer& TextNormalizer::operator=(TextNormalizer&&) noexcept = default;

void TextNormalizer::read(const Json& step, const std::string& where, const std::string& field) {
  const std::string type = type_of(step);
  const std::string named = where + ": " + field + " (" + type + ")";
  const auto string_field = [&](const char* key) {
    if (!step.contains(key) || !step[key].is_string())
      throw TokenizerError(named + ": \"" + key + "\" is not a string");
    return step[key].get<std::string>();
  };
  if (type == "Sequence") {
    const Json& inner = step.value("normalizers", Json());
    if (!inner.is_array()) throw TokenizerError(named + ": \"normalizers\" is not a list");
    for (std::size_t i = 0; i < inner.size(); ++i)
      read(inner[i], where, field + ".normalizers[" + std::to_string(i) + "]");
    return;
  }
  Step parsed{};
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    parsed.kind = Kind::unicode_form;
    parsed.form = type == "NFC"    ? UnicodeForm::nfc
                  : type == "NFD"  ? UnicodeForm::nfd
                  : type == "NFKC" ? UnicodeForm::nfkc
                                   : UnicodeForm::nfkd;
  } else if (type == "Lowercase") {
    parsed.kind = Kind::lowercase;
  } else if (type == "Replace") {
    parsed.kind = Kind::replace;
    read_pattern(step.value("pattern", Json()), named, parsed.pattern, parsed.regex);
    if (!parsed.regex && parsed.pattern.empty()) throw TokenizerError(named + ": the pattern is an empty string");
    parsed.content = string_field("content");
  } else if (type == "Prepend") {
    parsed.kind = Kind::prepend;
    parsed.content = string_field("prepend");
  } else if (type == "Strip") {
    parsed.kind = Kind::strip;
    const auto side = [&](const char* key) {
      if (!step.contains(key) || step[key].is_null()) return true;
      if (!step[key].is_boolean()) throw TokenizerError(named + ": \"" + key + "\" is not true or false");
      return step[key].get<bool>();
    };
    parsed.left = side("strip_left");
    parsed.right = side("strip_right");
  } else {
    throw TokenizerError(named +
                         " is not implemented (Strata implements NFC, NFD, NFKC, NFKD, Lowercase, Replace, "
                         "Prepend, Strip and Sequences of them)");
  }
  steps_.push_back(std::move(parsed));
}

bool TextNormalizer::apply_step(const Step& step, std::string_view text, std::string& out) const {
  switch (step.kind) {
    case Kind::unicode_form: return to_unicode_form(text, step.form, out);
    case Kind::lowercase: return to_lower_case(text, out);
    case Kind::prepend:
      if (text.empty()) return false;  // an empty stretch stays empty
      out.assign(step.content).append(text);
      return true;
    case Kind::strip: {
      const std::size_t begin = step.left ? leading_space(text) : 0;
      const std::size_t end = step.right ? std::max(begin, end_without_trailing_space(text)) : text.size();
      if (begin == 0 && end == text.size()) return false;
      out.assign(text.substr(begin, end - begin));
      return true;
    }
    case Kind::replace: {
      std::vector<std::pair<std::size_t, std::size_t>> matches;
      if (step.regex) {
        PretokenizerRegex::Matcher(*step.regex).find(text, matches);
      } else {
        for (auto at = text.find(step.pattern); at != std::string_view::npos;
             at = text.find(step.pattern, at + step.pattern.size()))
          matches.emplace_back(at, at + step.pattern.size());
      }
      if (matches.empty()) return false;
      out.clear();
      std::size_t copied = 0;
      for (const auto& [begin, end] : matches) {
        out.append(text.substr(copied, begin - copied)).append(step.content);
        copied = end;
      }
      out.append(text.substr(copied));
      return true;
    }
  }
  return false;
}

std::string_view TextNormalizer::apply(std::string_view text, std::string& scratch) const {
  std::string next;
  for (const Step& step : steps_) {
    if (!apply_step(step, text, next)) continue;
    scratch.swap(next);
    text = scratch;
  }
  return text;
}

}  // namespace strata
