#pragma once
// A plugin's own manifest table, as the host hands it to a factory.
//
// Every getter is noexcept: a missing key returns the default, and a wrong type, an out-of-range
// value or a key the plugin did not declare is *recorded* by the host, which refuses the plugin
// with a message naming the file, line, column and key once the factory returns.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class ConfigView {
 public:
  virtual ~ConfigView() = default;

  virtual bool has(std::string_view key) const noexcept = 0;

  virtual std::int64_t get_int(std::string_view key, std::int64_t default_value,
                               std::int64_t min_value = std::numeric_limits<std::int64_t>::min(),
                               std::int64_t max_value = std::numeric_limits<std::int64_t>::max()) noexcept = 0;
  virtual double get_double(std::string_view key, double default_value,
                            double min_value = -std::numeric_limits<double>::infinity(),
                            double max_value = std::numeric_limits<double>::infinity()) noexcept = 0;
  virtual bool get_bool(std::string_view key, bool default_value) noexcept = 0;
  // `allowed` empty means any string.
  virtual std::string get_string(std::string_view key, std::string_view default_value,
                                 const std::vector<std::string>& allowed = {}) noexcept = 0;
  virtual std::vector<double> get_double_list(std::string_view key, std::vector<double> default_value) noexcept = 0;
  virtual std::vector<std::int64_t> get_int_list(std::string_view key,
                                                 std::vector<std::int64_t> default_value) noexcept = 0;

  // Records a cross-field error found by the plugin itself ("betas[0] must be < 1").
  virtual void report_error(std::string_view key, std::string_view message) noexcept = 0;

  // ABI 1.1. Each element must be one of `allowed` (any string when it is empty).
  virtual std::vector<std::string> get_string_list(std::string_view key, std::vector<std::string> default_value,
                                                   const std::vector<std::string>& allowed = {}) noexcept = 0;
};

}  // namespace strata
