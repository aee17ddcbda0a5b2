#include "core/manifest/manifest_edit.hpp"

#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

namespace strata {

namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' || text.back() == '\n'))
    text.remove_suffix(1);
  return text;
}

// Where a line's comment starts (outside quotes), or npos.
std::size_t comment_at(std::string_view line) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\' && quote == '"')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return i;
    }
  }
  return std::string_view::npos;
}

struct Header {
  std::string name;
  bool array = false;
};

// A table header line ([name] or [[name]], a comment allowed after it).
std::optional<Header> header_of(std::string_view line) {
  std::string_view text = trimmed(line.substr(0, std::min(line.size(), comment_at(line))));
  const bool array = text.starts_with("[[") && text.ends_with("]]");
  if (!array && !(text.starts_with('[') && text.ends_with(']'))) return std::nullopt;
  text = trimmed(text.substr(array ? 2 : 1, text.size() - (array ? 4 : 2)));
  return Header{std::string(text), array};
}

// The bare key a `key = value` line sets, or "" (a dotted or quoted key is not edited here).
std::string key_of(std::string_view line) {
  const std::string_view text = trimmed(line);
  std::size_t end = 0;
  while (end < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[end])) != 0 || text[end] == '_' || text[end] == '-'))
    ++end;
  if (end == 0) return {};
  const std::string_view rest = trimmed(text.substr(end));
  return rest.starts_with('=') ? std::string(text.substr(0, end)) : std::string();
}

// Two nodes of the same type and value (toml++ compares tables, arrays and values, not nodes).
bool same(const toml::node& a, const toml::node& b) {
  if (a.type() != b.type()) return false;
  return a.visit([&](const auto& x) {
    const auto* y = b.as<std::remove_cvref_t<decltype(x)>>();
    return y != nullptr && x == *y;
  });
}

// A value as the manifests here write them: strings in double quotes (toml++ prints literal
// strings, in single ones), everything else as toml++ prints it.
std::string value_text(const toml::node& node) {
  if (const auto* text = node.as_string()) {
    std::string quoted = "\"";
    for (const char c : text->get()) {
      if (c == '"' || c == '\\') quoted += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
        quoted += escaped;
      } else {
        quoted += c;
      }
    }
    return quoted + "\"";
  }
  std::ostringstream out;
  node.visit([&](const auto& value) { out << value; });
  return out.str();
}

struct Section {
  Header header;
  std::size_t begin = 0;  // the header's line (0 for the root: no header)
  std::size_t end = 0;    // one past its last line
};

}  // namespace

std::optional<std::string> edit_manifest_text(std::string_view original, const toml::table& wanted) {
  toml::table have;
  try {
    have = toml::parse(original);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < original.size();) {
    const std::size_t newline = original.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? original.size() : newline + 1;
    lines.emplace_back(original.substr(start, end - start));
    start = end;
  }
  std::vector<Section> sections{{Header{}, 0, 0}};
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (const auto header = header_of(lines[i])) {
      sections.back().end = i;
      sections.push_back({*header, i, 0});
    }
  sections.back().end = lines.size();

  std::map<std::size_t, std::string> replaced;               // line -> new text
  std::set<std::size_t> removed;                             // lines dropped
  std::map<std::size_t, std::vector<std::string>> inserted;  // after line -> new lines
  std::string appended;
  const auto line_of_key = [&](const Section& section, const std::string& key) -> std::optional<std::size_t> {
    for (std::size_t i = section.begin + (section.header.name.empty() ? 0 : 1); i < section.end; ++i)
      if (key_of(lines[i]) == key) return i;
    return std::nullopt;
  };
  const auto last_key_line = [&](const Section& section) {
    std::size_t last = section.begin;
    for (std::size_t i = section.begin + 1; i < section.end; ++i)
      if (!key_of(lines[i]).empty()) last = i;
    return last;
  };
  const auto block_of = [](const std::string& name, bool array,
                           const toml::table& table) -> std::optional<std::string> {
    std::string block = "\n" + std::string(array ? "[[" : "[") + name + (array ? "]]" : "]") + "\n";
    if (const toml::node* plugin = table.get("plugin")) block += "plugin = " + value_text(*plugin) + "\n";  // first
    for (const auto& [key, node] : table) {
      if (node.is_table() || node.is_array_of_tables()) return std::nullopt;
      if (key.str() != "plugin") block += std::string(key.str()) + " = " + value_text(node) + "\n";
    }
    return block;
  };

  std::set<std::string> names;
  for (const auto& [key, node] : wanted) names.insert(std::string(key.str()));
  for (const auto& [key, node] : have) names.insert(std::string(key.str()));
  for (const std::string& name : names) {
    const toml::node* want = wanted.get(name);
    const toml::node* had = have.get(name);
    if (want != nullptr && had != nullptr && same(*want, *had)) continue;
    const bool want_table = want != nullptr && want->is_table(), had_table = had != nullptr && had->is_table();
    const bool want_array = want != nullptr && want->is_array_of_tables();
    const bool had_array = had != nullptr && had->is_array_of_tables();
    if ((want != nullptr && !want_table && !want_array) || (had != nullptr && !had_table && !had_array))
      return std::nullopt;          // a root key, or an array of values: not this editor's
    if (want_array || had_array) {  // every [[name]] block anew, at the end
      if (want_table || had_table) return std::nullopt;
      for (const Section& section : sections)
        if (section.header.array && section.header.name == name)
          for (std::size_t i = section.begin; i < section.end; ++i) removed.insert(i);
      if (want_array)
        for (const toml::node& element : *want->as_array()) {
          const auto block = block_of(name, true, *element.as_table());
          if (!block) return std::nullopt;
          appended += *block;
        }
      continue;
    }
    const Section* section = nullptr;
    for (const Section& each : sections)
      if (!each.header.array && each.header.name == name) section = &each;
    if (!want_table) {  // a table the stack drops
      if (section == nullptr) return std::nullopt;
      for (std::size_t i = section->begin; i < section->end; ++i) removed.insert(i);
      continue;
    }
    if (section == nullptr) {  // a table the stack adds
      const auto block = block_of(name, false, *want->as_table());
      if (!block) return std::nullopt;
      appended += *block;
      continue;
    }
    const toml::table& to = *want->as_table();
    const toml::table& from = *had->as_table();
    for (const auto& [key, node] : from)
      if (!to.contains(key.str())) {
        const auto line = line_of_key(*section, std::string(key.str()));
        if (!line) return std::nullopt;
        removed.insert(*line);
      }
    for (const auto& [key, node] : to) {
      if (node.is_table() || node.is_array_of_tables()) {
        if (const toml::node* old = from.get(key.str()); old == nullptr || !same(*old, node)) return std::nullopt;
        continue;
      }
      const toml::node* old = from.get(key.str());
      if (old != nullptr && same(*old, node)) continue;
      const std::string text = std::string(key.str()) + " = " + value_text(node);
      if (old == nullptr) {
        inserted[last_key_line(*section)].push_back(text + "\n");
        continue;
      }
      const auto line = line_of_key(*section, std::string(key.str()));
      if (!line) return std::nullopt;
      const std::string& was = lines[*line];
      const std::size_t comment = comment_at(was);
      const std::size_t indent = was.find_first_not_of(" \t");
      replaced[*line] = was.substr(0, indent) + text +
                        (comment == std::string::npos ? std::string("\n") : "  " + was.substr(comment));
      if (!replaced[*line].ends_with('\n')) replaced[*line] += '\n';
    }
  }

  std::string result;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!removed.contains(i)) result += replaced.contains(i) ? replaced[i] : lines[i];
    if (const auto more = inserted.find(i); more != inserted.end() && !removed.contains(i))
      for (const std::string& line : more->second) result += line;
  }
  if (!result.empty() && !result.ends_with('\n')) result += '\n';
  result += appended;
  try {
    if (!(toml::parse(result) == wanted)) return std::nullopt;
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
  return result;
}

}  // namespace strata
