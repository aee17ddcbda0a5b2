#include "core/manifest/toml_config_view.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/util/did_you_mean.hpp"

namespace strata {

std::string_view toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date/time";
  }
}

TomlConfigView::TomlConfigView(const toml::table* table, TableOrigin origin, std::vector<std::string> declared_keys)
    : table_(table), origin_(std::move(origin)), declared_keys_(std::move(declared_keys)) {}

std::string TomlConfigView::where(std::string_view key) const {
  const std::string dotted =
      origin_.dotted_path.empty() ? std::string(key) : origin_.dotted_path + "." + std::string(key);
  if (origin_.overridden != nullptr && origin_.overridden->contains(dotted)) return "--set " + dotted;
  const toml::node* node = table_ != nullptr ? table_->get(key) : nullptr;
  const toml::source_region source =
      node != nullptr ? node->source() : (table_ != nullptr ? table_->source() : toml::source_region{});
  std::ostringstream text;
  text << origin_.file;
  if (source.begin.line > 0) text << ':' << source.begin.line << ':' << source.begin.column;
  return text.str();
}

void TomlConfigView::problem(std::string_view key, const std::string& message) {
  problems_.push_back(where(key) + ": " + origin_.label + " " + message);
}

const toml::node* TomlConfigView::find(std::string_view key) {
  read_keys_.emplace(key);
  if (std::find(declared_keys_.begin(), declared_keys_.end(), key) == declared_keys_.end()) {
    problem(key, "read key '" + std::string(key) +
                     "' that its plugin did not declare (declared: " + join_words(declared_keys_) + ")");
    return nullptr;
  }
  return table_ != nullptr ? table_->get(key) : nullptr;
}

std::string TomlConfigView::type_problem(std::string_view key, std::string_view expected,
                                         const toml::node& node) const {
  return std::string(key) + " must be " + std::string(expected) + ", not " + std::string(toml_type_name(node));
}

std::vector<std::string> TomlConfigView::unread_keys() const {
  std::vector<std::string> unread;
  for (const std::string& key : declared_keys_)
    if (key != "plugin" && !read_keys_.contains(key)) unread.push_back(key);
  return unread;
}

bool TomlConfigView::has(std::string_view key) const noexcept {
  try {
    read_keys_.emplace(key);
  } catch (...) {  // out of memory: the key only goes unrecorded, and at worst draws a false warning
  }
  return table_ != nullptr && table_->contains(key);
}

std::int64_t TomlConfigView::get_int(std::string_view key, std::int64_t default_value, std::int64_t min_value,
                                     std::int64_t max_value) noexcept {
  try {
    const toml::node* node = find(key);
    if (node == nullptr) return default_value;
    const auto value = node->value<std::int64_t>();
    if (!node->is_integer() || !value) {
      problem(key, type_problem(key, "an integer", *node));
      return default_value;
    }
    if (*value < min_value || *value > max_value) {
      std::string range =
          "[" +
          (min_value == std::numeric_limits<std::int64_t>::min() ? std::string("-inf") : std::to_string(min_value)) +
          ", " +
          (max_value == std::numeric_limits<std::int64_t>::max() ? std::string("inf") : std::to_string(max_value)) +
          "]";
      problem(key, std::string(key) + " = " + std::to_string(*value) + " is out of range " + range);
      return default_value;
    }
    return *value;
  } catch (...) {
    return default_value;
  }
}

double TomlConfigView::get_double(std::string_view key, double default_value, double min_value,
                                  double max_value) noexcept {
  try {
    const toml::node* node = find(key);
    if (node == nullptr) return default_value;
    if (!node->is_number()) {
      problem(key, type_problem(key, "a number", *node));
      return default_value;
    }
    const double value = node->value<double>().value_or(default_value);
    if (!(value >= min_value && value <= max_value)) {
      std::ostringstream text;
      text << key << " = " << value << " is out of range [" << min_value << ", " << max_value << "]";
      problem(key, text.str());
      return default_value;
    }
    return value;
  } catch (...) {
    return default_value;
  }
}

bool TomlConfigView::get_bool(std::string_view key, bool default_value) noexcept {
  try {
    const toml::node* node = find(key);
    if (node == nullptr) return default_value;
    if (!node->is_boolean()) {
      problem(key, type_problem(key, "a boolean", *node));
      return default_value;
    }
    return *node->value<bool>();
  } catch (...) {
    return default_value;
  }
}

bool TomlConfigView::is_allowed(std::string_view key, const std::string& subject, const std::string& value,
                                const std::vector<std::string>& allowed) {
  if (allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return true;
  std::string message = subject + " is not one of: " + join_words(allowed);
  if (const std::string near = closest_match(value, allowed); !near.empty())
    message += " (did you mean \"" + near + "\"?)";
  problem(key, message);
  return false;
}

std::string TomlConfigView::get_string(std::string_view key, std::string_view default_value,
                                       const std::vector<std::string>& allowed) noexcept {
  try {
    const toml::node* node = find(key);
    if (node == nullptr) return std::string(default_value);
    if (!node->is_string()) {
      problem(key, type_problem(key, "a string", *node));
      return std::string(default_value);
    }
    std::string value = *node->value<std::string>();
    if (!is_allowed(key, std::string(key) + " = \"" + value + "\"", value, allowed)) return std::string(default_value);
    return value;
  } catch (...) {
    return std::string(default_value);
  }
}

template <typename T>
std::optional<std::vector<T>> TomlConfigView::read_list(std::string_view key, std::string_view element_kind) {
  const toml::node* node = find(key);
  if (node == nullptr) return std::nullopt;
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    problem(key, type_problem(key, "an array of " + std::string(element_kind), *node));
    return std::nullopt;
  }
  std::vector<T> values;
  for (const toml::node& element : *array) {
    bool right_type = element.is_string();
    if constexpr (std::is_same_v<T, double>) right_type = element.is_number();  // integers are numbers too
    if constexpr (std::is_same_v<T, std::int64_t>) right_type = element.is_integer();
    if (!right_type) {
      problem(key, std::string(key) + " must hold " + std::string(element_kind) + ", not " +
                       std::string(toml_type_name(element)));
      return std::nullopt;
    }
    values.push_back(*element.value<T>());
  }
  return values;
}

std::vector<double> TomlConfigView::get_double_list(std::string_view key, std::vector<double> default_value) noexcept {
  try {
    return read_list<double>(key, "numbers").value_or(std::move(default_value));
  } catch (...) {
    return default_value;
  }
}

std::vector<std::int64_t> TomlConfigView::get_int_list(std::string_view key,
                                                       std::vector<std::int64_t> default_value) noexcept {
  try {
    return read_list<std::int64_t>(key, "integers").value_or(std::move(default_value));
  } catch (...) {
    return default_value;
  }
}

std::vector<std::string> TomlConfigView::get_string_list(std::string_view key, std::vector<std::string> default_value,
                                                         const std::vector<std::string>& allowed) noexcept {
  try {
    std::optional<std::vector<std::string>> values = read_list<std::string>(key, "strings");
    if (!values) return default_value;
    for (const std::string& value : *values)
      if (!is_allowed(key, std::string(key) + " holds \"" + value + "\", which", value, allowed)) return default_value;
    return *values;
  } catch (...) {
    return default_value;
  }
}

void TomlConfigView::report_error(std::string_view key, std::string_view message) noexcept {
  try {
    // The message must name the key; a plugin's own wording may not.
    if (message.find(key) == std::string_view::npos)
      problem(key, std::string(key) + ": " + std::string(message));
    else
      problem(key, std::string(message));
  } catch (...) {
  }
}

void TomlConfigView::check_unknown_keys() {
  if (table_ == nullptr) return;
  for (const auto& [key, node] : *table_) {
    const std::string name(key.str());
    if (std::find(declared_keys_.begin(), declared_keys_.end(), name) != declared_keys_.end()) continue;
    std::string message = "unknown key '" + name + "'; accepted keys: " + join_words(declared_keys_);
    if (const std::string near = closest_match(name, declared_keys_); !near.empty())
      message += " (did you mean '" + near + "'?)";
    // Point at the key itself, not its value.
    const toml::source_region source = key.source();
    if (source.begin.line > 0 &&
        !(origin_.overridden && origin_.overridden->contains(origin_.dotted_path + "." + name)))
      problems_.push_back(origin_.file + ":" + std::to_string(source.begin.line) + ":" +
                          std::to_string(source.begin.column) + ": " + origin_.label + " " + message);
    else
      problem(name, message);
  }
}

}  // namespace strata
