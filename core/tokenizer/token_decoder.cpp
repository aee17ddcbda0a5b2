#include "core/tokenizer/token_decoder.hpp"

#include <optional>

#include "core/tokenizer/tokenizer_json_support.hpp"
#include "core/tokenizer/utf8.hpp"

namespace strata {

namespace {

using Json = nlohmann::json;

using tokenizer_json::character_length;
using tokenizer_json::type_of;

std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  std::size_t copied = 0;
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + from.size())) {
    out.append(text, copied, at - copied).append(to);
    copied = at + from.size();
  }
  return copied == 0 ? text : out.append(text, copied);
}

// A token spelled <0xNN>: its byte.
std::optional<unsigned char> fallback_byte(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int high = hex(token[3]), low = hex(token[4]);
  if (high < 0 || low < 0) return std::nullopt;
  return static_cast<unsigned char>(high * 16 + low);
}

// Strip's cut: up to `count` leading (or trailing) characters equal to `content`.
std::string strip_characters(const std::string& token, const std::string& content, std::size_t start,
                             std::size_t stop) {
  std::vector<std::size_t> offsets;  // where each character starts, then the end
  for (std::size_t i = 0; i < token.size(); i += character_length(static_cast<unsigned char>(token[i])))
    offsets.push_back(i);
  offsets.push_back(token.size());
  const std::size_t characters = offsets.size() - 1;
  const auto is_content = [&](std::size_t c) {
    return token.compare(offsets[c], offsets[c + 1] - offsets[c], content) == 0;
  };
  std::size_t first = 0;
  while (first < start && first < characters && is_content(first)) ++first;
  std::size_t last = characters;
  for (std::size_t k = 0; k < stop && last > first && is_content(last - 1); ++k) --last;
  return token.substr(offsets[first], offsets[last] - offsets[first]);
}

}  // namespace

TokenDecoder::TokenDecoder(const Json& decoder, const std::string& where) {
  if (decoder.is_null()) return;
  if (type_of(decoder) == "ByteLevel") {
    byte_level_ = true;
    return;
  }
  if (type_of(decoder) != "Sequence") {
    read_step(decoder, where, "decoder (" + type_of(decoder) + ")");
    return;
  }
  const Json& steps = decoder.value("decoders", Json());
  if (!steps.is_array()) throw TokenizerError(where + ": decoder (Sequence): \"decoders\" is not a list");
  for (std::size_t i = 0; i < steps.size(); ++i)
    read_step(steps[i], where, "decoder step " + std::to_string(i) + " (" + type_of(steps[i]) + ")");
}

TokenDecoder::~TokenDecoder() = default;
TokenDecoder::TokenDecoder(TokenDecoder&&) noexcept = default;
TokenDecoder& TokenDecoder::operator=(TokenDecoder&&) noexcept = default;

void TokenDecoder::read_step(const Json& step, const std::string& where, const std::string& field) {
  const std::string type = type_of(step);
  const std::string named = where + ": " + field;
  Step parsed{};
  if (type == "Replace") {
    parsed.kind = Kind::replace;
    const Json& pattern = step.value("pattern", Json());
    if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string())
      parsed.regex = std::make_unique<PretokenizerRegex>(pattern["Regex"].get<std::string>(), named);
    else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string() &&
             !pattern["String"].get<std::string>().empty())
      parsed.pattern = pattern["String"].get<std::string>();
    else
      throw TokenizerError(named + ": pattern is neither {\"Regex\": ...} nor a non-empty {\"String\": ...}");
    if (!step.contains("content") || !step["content"].is_string())
      throw TokenizerError(named + ": \"content\" is not a string");
    parsed.content = step["content"].get<std::string>();
  } else if (type == "ByteFallback") {
    parsed.kind = Kind::byte_fallback;
  } else if (type == "Fuse") {
    parsed.kind = Kind::fuse;
  } else if (type == "Strip") {
    parsed.kind = Kind::strip;
    const std::string content = step.value("content", std::string(" "));
    if (content.empty() || character_length(static_cast<unsigned char>(content[0])) != content.size())
      throw TokenizerError(named + ": \"content\" is not one character");
    parsed.content = content;
    const auto count = [&](const char* key) -> std::size_t {
      if (!step.contains(key) || step[key].is_null()) return 0;
      if (!step[key].is_number_integer() || step[key].get<std::int64_t>() < 0)
        throw TokenizerError(named + ": \"" + key + "\" is not a count");
      return static_cast<std::size_t>(step[key].get<std::int64_t>());
    };
    parsed.start = count("start");
    parsed.stop = count("stop");
  } else if (type == "Metaspace") {
    parsed.kind = Kind::metaspace;
    parsed.content = step.value("replacement", std::string("\xE2\x96\x81"));
    if (parsed.content.empty()) throw TokenizerError(named + ": the replacement is empty");
    if (step.contains("prepend_scheme") && step["prepend_scheme"].is_string())
      parsed.strip_first_space = step["prepend_scheme"].get<std::string>() != "never";
    else if (step.contains("add_prefix_space") && step["add_prefix_space"].is_boolean())
      parsed.strip_first_space = step["add_prefix_space"].get<bool>();
  } else if (type == "ByteLevel") {
    throw TokenizerError(named + ": ByteLevel is implemented as the whole decoder only, not as a step");
  } else {
    throw TokenizerError(named +
                         " is not implemented (Strata's BPE decodes with ByteLevel, or with Replace, "
                         "ByteFallback, Fuse, Strip and Metaspace)");
  }
  steps_.push_back(std::move(parsed));
}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::replace:
        for (std::string& token : tokens) {
          if (!step.regex) {
            token = replace_all(token, step.pattern, step.content);
            continue;
          }
          std::vector<std::pair<std::size_t, std::size_t>> matches;
          PretokenizerRegex::Matcher(*step.regex).find(token, matches);
          std::string out;
          std::size_t copied = 0;
          for (const auto& [begin, end] : matches) {
            out.append(token, copied, begin - copied).append(step.content);
            copied = end;
          }
          token = out.append(token, copied);
        }
        break;
      case Kind::byte_fallback: {
        std::vector<std::string> out;
        std::string bytes;
        std::size_t count = 0;
        const auto flush = [&] {
          if (count == 0) return;
          if (first_invalid_utf8(bytes)) {
            std::string replaced;
            for (std::size_t i = 0; i < count; ++i) replaced += "\xEF\xBF\xBD";
            out.push_back(std::move(replaced));
          } else {
            out.push_back(bytes);
          }
          bytes.clear();
          count = 0;
        };
        for (std::string& token : tokens) {
          if (const auto byte = fallback_byte(token)) {
            bytes += static_cast<char>(*byte);
            ++count;
            continue;
          }
          flush();
          out.push_back(std::move(token));
        }
        flush();
        tokens.swap(out);
        break;
      }
      case Kind::fuse: {
        std::string joined;
        for (const std::string& token : tokens) joined += token;
        tokens.assign(1, std::move(joined));
        break;
      }
      case Kind::strip:
        for (std::string& token : tokens) token = strip_characters(token, step.content, step.start, step.stop);
        break;
      case Kind::metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          tokens[i] = replace_all(tokens[i], step.content, " ");
          if (i == 0 && step.strip_first_space && tokens[i].starts_with(' ')) tokens[i].erase(0, 1);
        }
        break;
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace strata
