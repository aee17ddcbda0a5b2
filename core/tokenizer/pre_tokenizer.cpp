#include "core/tokenizer/pre_tokenizer.hpp"

#include <algorithm>
#include <cstring>

#include "core/tokenizer/tokenizer_json_support.hpp"

namespace strata {

namespace {

using Json = nlohmann::json;

using tokenizer_json::flag;
using tokenizer_json::type_of;

// The characters the regex must not treat specially in a Split's literal String pattern.
std::string regex_quote(const std::string& literal) {
  std::string quoted;
  for (char c : literal) {
    if (std::strchr("\\^$.|?*+()[]{}", c) != nullptr) quoted += '\\';
    quoted += c;
  }
  return quoted;
}

struct Part {
  std::size_t begin, end;
  bool is_match;
};

// Hugging Face's SplitDelimiterBehavior over the parts of one piece (matches and the stretches
// between them, in order, none empty), appended to `out` with the merged parts' offsets widened;
// Removed drops the matches.
template <typename Behavior>
void apply_behavior(Behavior behavior, const std::vector<Part>& parts,
                    std::vector<std::pair<std::size_t, std::size_t>>& out) {
  const std::size_t first = out.size();
  bool previous_match = false;
  switch (behavior) {
    case Behavior::removed:
      for (const Part& part : parts)
        if (!part.is_match) out.emplace_back(part.begin, part.end);
      return;
    case Behavior::isolated:
      for (const Part& part : parts) out.emplace_back(part.begin, part.end);
      return;
    case Behavior::merged_with_previous:
      for (const Part& part : parts) {
        if (part.is_match && !previous_match && out.size() > first)
          out.back().second = part.end;
        else
          out.emplace_back(part.begin, part.end);
        previous_match = part.is_match;
      }
      return;
    case Behavior::merged_with_next:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && out.size() > first)
          out.back().first = it->begin;
        else
          out.emplace_back(it->begin, it->end);
        previous_match = it->is_match;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
      return;
    case Behavior::contiguous:
      for (const Part& part : parts) {
        if (part.is_match == previous_match && out.size() > first)
          out.back().second = part.end;
        else
          out.emplace_back(part.begin, part.end);
        previous_match = part.is_match;
      }
      return;
  }
}

}  // namespace

PreTokenizer::PreTokenizer(const Json& pre_tokenizer, const std::string& where) {
  if (pre_tokenizer.is_null()) return;
  if (type_of(pre_tokenizer) != "Sequence") {
    read_step(pre_tokenizer, true, where, "pre_tokenizer (" + type_of(pre_tokenizer) + ")");
    return;
  }
  const Json& steps = pre_tokenizer.value("pretokenizers", Json());
  if (!steps.is_array()) throw TokenizerError(where + ": pre_tokenizer (Sequence): \"pretokenizers\" is not a list");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (type_of(steps[i]) == "Sequence")
      throw TokenizerError(where + ": pre_tokenizer step " + std::to_string(i) +
                           " is a Sequence inside a Sequence, which is not implemented");
    read_step(steps[i], i + 1 == steps.size(), where,
              "pre_tokenizer step " + std::to_string(i) + " (" + type_of(steps[i]) + ")");
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::read_step(const Json& step, bool last, const std::string& where, const std::string& field) {
  const std::string type = type_of(step);
  const std::string named = where + ": " + field;
  Step parsed{};
  if (type == "ByteLevel") {
    if (!last) throw TokenizerError(named + " must be the last step");
    parsed.kind = Kind::byte_level;
    parsed.add_prefix_space = flag(step, "add_prefix_space", false, named);
    if (flag(step, "use_regex", true, named))
      parsed.regex = std::make_unique<PretokenizerRegex>(kGpt2PretokenizerPattern, named);
    byte_level_ = true;
  } else if (type == "Split") {
    parsed.kind = Kind::split;
    const std::string behavior = step.value("behavior", std::string());
    if (behavior == "Removed")
      parsed.behavior = Behavior::removed;
    else if (behavior == "Isolated")
      parsed.behavior = Behavior::isolated;
    else if (behavior == "MergedWithPrevious")
      parsed.behavior = Behavior::merged_with_previous;
    else if (behavior == "MergedWithNext")
      parsed.behavior = Behavior::merged_with_next;
    else if (behavior == "Contiguous")
      parsed.behavior = Behavior::contiguous;
    else
      throw TokenizerError(named + ": behavior \"" + behavior +
                           "\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
    parsed.invert = flag(step, "invert", false, named);
    const Json& pattern = step.value("pattern", Json());
    if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string())
      parsed.regex = std::make_unique<PretokenizerRegex>(pattern["Regex"].get<std::string>(), named);
    else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string() &&
             !pattern["String"].get<std::string>().empty()) {
      parsed.literal = pattern["String"].get<std::string>();
      parsed.regex = std::make_unique<PretokenizerRegex>(regex_quote(parsed.literal), named);
    } else
      throw TokenizerError(named + ": pattern is neither {\"Regex\": ...} nor a non-empty {\"String\": ...}");
  } else if (type == "Metaspace") {
    parsed.kind = Kind::metaspace;
    parsed.replacement = step.value("replacement", std::string("\xE2\x96\x81"));
    if (parsed.replacement.empty()) throw TokenizerError(named + ": the replacement is empty");
    // Files written before prepend_scheme existed say add_prefix_space instead.
    const std::string scheme =
        step.contains("prepend_scheme") && step["prepend_scheme"].is_string()
            ? step["prepend_scheme"].get<std::string>()
            : (flag(step, "add_prefix_space", true, named) ? std::string("always") : std::string("never"));
    if (scheme == "always")
      parsed.prepend = Prepend::always;
    else if (scheme == "first")
      parsed.prepend = Prepend::first;
    else if (scheme == "never")
      parsed.prepend = Prepend::never;
    else
      throw TokenizerError(named + ": prepend_scheme \"" + scheme + "\" is not always, first or never");
    parsed.split = flag(step, "split", true, named);
  } else {
    throw TokenizerError(named + " is not implemented (Strata's BPE takes Split, Metaspace and ByteLevel steps)");
  }
  steps_.push_back(std::move(parsed));
}

std::vector<std::string_view> PreTokenizer::isolated_patterns() const {
  std::vector<std::string_view> patterns;
  for (const Step& step : steps_) {
    const bool isolated = (step.kind == Kind::split && step.behavior == Behavior::isolated && !step.invert) ||
                          (step.kind == Kind::byte_level && !step.add_prefix_space);
    if (!isolated) return {};
    if (step.regex) patterns.push_back(step.regex->pattern());
  }
  return patterns;
}

PreTokenizer::Splitter::Splitter(const PreTokenizer& pre_tokenizer) : pre_tokenizer_(pre_tokenizer) {
  for (const Step& step : pre_tokenizer.steps_)
    matchers_.push_back(step.regex ? std::make_unique<PretokenizerRegex::Matcher>(*step.regex) : nullptr);
}

PreTokenizer::Splitter::~Splitter() = default;

std::string_view PreTokenizer::Splitter::split(std::string_view text, bool at_text_start, Pieces& pieces) {
  Pieces& current = current_;
  current.assign(1, {0, text.size()});
  int buffer = 0;
  for (std::size_t s = 0; s < pre_tokenizer_.steps_.size(); ++s) {
    const Step& step = pre_tokenizer_.steps_[s];
    // Rewriting steps first build the new text with its pieces, then split them as Splits do.
    if (step.kind == Kind::metaspace || (step.kind == Kind::byte_level && step.add_prefix_space)) {
      std::string& rewritten = buffers_[buffer];
      buffer ^= 1;
      rewritten.clear();
      next_.clear();
      for (const auto& [begin, end] : current) {
        const std::string_view piece = text.substr(begin, end - begin);
        const std::size_t start = rewritten.size();
        if (step.kind == Kind::byte_level) {
          if (piece.front() != ' ') rewritten += ' ';
          rewritten.append(piece);
        } else {
          const bool at_start = at_text_start && begin == 0;
          const bool prepend = step.prepend == Prepend::always || (step.prepend == Prepend::first && at_start);
          if (prepend && piece.substr(0, 1) != " " && piece.substr(0, step.replacement.size()) != step.replacement)
            rewritten += step.replacement;
          for (char c : piece)
            if (c == ' ')
              rewritten += step.replacement;
            else
              rewritten += c;
        }
        next_.emplace_back(start, rewritten.size());
      }
      text = rewritten;
      current.swap(next_);
      if (step.kind == Kind::metaspace && step.split) {
        next_.clear();
        for (const auto& [begin, end] : current) {
          parts_.clear();
          std::size_t previous = begin;
          const std::string_view piece = text.substr(begin, end - begin);
          for (auto at = piece.find(step.replacement); at != std::string_view::npos;
               at = piece.find(step.replacement, at + step.replacement.size())) {
            if (begin + at > previous) parts_.emplace_back(previous, begin + at);
            previous = begin + at;
          }
          if (end > previous) parts_.emplace_back(previous, end);
          next_.insert(next_.end(), parts_.begin(), parts_.end());
        }
        current.swap(next_);
      }
    }
    if (!matchers_[s]) continue;
    next_.clear();
    for (const auto& [begin, end] : current) {
      const Behavior behavior = step.kind == Kind::split ? step.behavior : Behavior::isolated;
      if (behavior == Behavior::isolated && !step.invert) {  // every part a piece: the common case, kept quick
        matchers_[s]->isolate(text.substr(begin, end - begin), begin, next_);
        continue;
      }
      matches_.clear();
      matchers_[s]->find(text.substr(begin, end - begin), matches_);
      std::vector<Part> parts;
      std::size_t previous = 0;
      for (const auto& [match_begin, match_end] : matches_) {
        if (match_begin > previous) parts.push_back({begin + previous, begin + match_begin, false});
        parts.push_back({begin + match_begin, begin + match_end, true});
        previous = match_end;
      }
      if (begin + previous < end) parts.push_back({begin + previous, end, false});
      if (step.invert)
        for (Part& part : parts) part.is_match = !part.is_match;
      apply_behavior(behavior, parts, next_);
    }
    current.swap(next_);
  }
  pieces.swap(current);  // the caller's buffer becomes the next call's
  return text;
}

}  // namespace strata
