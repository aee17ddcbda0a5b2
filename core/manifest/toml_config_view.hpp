#pragma once
// A TOML table read strictly: the keys it may hold are declared up front; unknown keys, wrong
// types and out-of-range values become problems that name file:line:column, the key, the accepted
// keys and the nearest one. Core's own tables and every plugin's table are read through this.
#include <toml++/toml.h>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "strata/config_view.hpp"

namespace strata {

// Where a table came from, to word its problems.
struct TableOrigin {
  std::string file;                                   // the manifest path
  std::string label;                                  // "[train]", "[[strategy]] #2 (checkpoint)"
  std::string dotted_path;                            // "train", "strategy.1": what --set would write
  const std::set<std::string>* overridden = nullptr;  // dotted keys set on the command line
};

class TomlConfigView final : public ConfigView {
 public:
  TomlConfigView(const toml::table* table, TableOrigin origin, std::vector<std::string> declared_keys);

  bool has(std::string_view key) const noexcept override;
  std::int64_t get_int(std::string_view key, std::int64_t default_value, std::int64_t min_value,
                       std::int64_t max_value) noexcept override;
  double get_double(std::string_view key, double default_value, double min_value, double max_value) noexcept override;
  bool get_bool(std::string_view key, bool default_value) noexcept override;
  std::string get_string(std::string_view key, std::string_view default_value,
                         const std::vector<std::string>& allowed) noexcept override;
  std::vector<double> get_double_list(std::string_view key, std::vector<double> default_value) noexcept override;
  std::vector<std::int64_t> get_int_list(std::string_view key,
                                         std::vector<std::int64_t> default_value) noexcept override;
  void report_error(std::string_view key, std::string_view message) noexcept override;
  std::vector<std::string> get_string_list(std::string_view key, std::vector<std::string> default_value,
                                           const std::vector<std::string>& allowed) noexcept override;

  // Adds a problem for every key present in the table but not declared.
  void check_unknown_keys();
  const std::vector<std::string>& problems() const noexcept { return problems_; }
  // Declared keys nothing has read or asked about (has) so far, `plugin` aside: after a plugin's
  // factory ran, a declared key it never reads is a descriptor mistake, and setting it does nothing.
  std::vector<std::string> unread_keys() const;
  // "file:line:column" of a key, or of the table when the key is absent.
  std::string where(std::string_view key) const;

 private:
  const toml::node* find(std::string_view key);
  void problem(std::string_view key, const std::string& message);
  std::string type_problem(std::string_view key, std::string_view expected, const toml::node& node) const;
  // An array whose elements all have T's TOML type; nullopt when absent or (problem recorded) wrong.
  template <typename T>
  std::optional<std::vector<T>> read_list(std::string_view key, std::string_view element_kind);
  // Records "<subject> is not one of: ..." with a did-you-mean unless `allowed` is empty or holds value.
  bool is_allowed(std::string_view key, const std::string& subject, const std::string& value,
                  const std::vector<std::string>& allowed);

  const toml::table* table_;
  TableOrigin origin_;
  std::vector<std::string> declared_keys_;
  std::vector<std::string> problems_;
  mutable std::set<std::string, std::less<>> read_keys_;
};

// toml++'s node type, in words.
std::string_view toml_type_name(const toml::node& node);

}  // namespace strata
