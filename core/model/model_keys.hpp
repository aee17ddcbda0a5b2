#pragma once
// The [model] table as a family reads its own keys (ModelFamily::read_keys): through the SDK's
// ConfigView (strict: ranges, types, unknown keys), with config.json's value as each key's default
// when [model] from names a directory, and a written value that differs from it refused, naming
// config.json's field.
#include <functional>
#include <sstream>
#include <string>
#include <string_view>

#include "core/model/hf_model_config.hpp"
#include "strata/config_view.hpp"

namespace strata {

class ModelKeys {
 public:
  // `config`: config.json's, or null without [model] from; `config_file` names it in messages.
  // `no_problems_yet`: whether the table has no problem so far (a check between keys reads nothing
  // else: a refused value stands at its default, which the user never wrote).
  ModelKeys(ConfigView& view, const HfModelConfig* config, std::string config_file,
            std::function<bool()> no_problems_yet)
      : view_(view),
        config_(config),
        config_file_(std::move(config_file)),
        no_problems_yet_(std::move(no_problems_yet)) {}

  ConfigView& view() { return view_; }
  const HfModelConfig* config() const { return config_; }
  // Called once the five keys every family has are read: whether they took their written values.
  void shape_read() { shape_as_written_ = no_problems_yet_(); }
  bool shape_as_written() const { return shape_as_written_; }
  bool no_problems_yet() const { return no_problems_yet_(); }
  void report_error(std::string_view key, const std::string& message) { view_.report_error(key, message); }

  // `written` (the key's value, read with config.json's as its default) refused when it differs
  // from `configured`, config.json's `field`.
  template <typename T>
  T agree(const char* key, T written, T configured, const char* field) {
    if (config_ && view_.has(key) && written != configured)
      view_.report_error(key, std::string(key) + " = " + (std::ostringstream() << std::boolalpha << written).str() +
                                  " disagrees with " + config_file_ + "'s " + field + " = " +
                                  (std::ostringstream() << std::boolalpha << configured).str() +
                                  " (leave it out to take the model's)");
    return written;
  }
  int integer(const char* key, int fallback, int min_value, int max_value, int configured, const char* field) {
    if (config_ && (configured < min_value || configured > max_value))
      out_of_range(key, configured, min_value, max_value, field);
    return agree(key, static_cast<int>(view_.get_int(key, config_ ? configured : fallback, min_value, max_value)),
                 configured, field);
  }
  double number(const char* key, double fallback, double min_value, double max_value, double configured,
                const char* field) {
    if (config_ && !(configured >= min_value && configured <= max_value))
      out_of_range(key, configured, min_value, max_value, field);
    return agree(key, view_.get_double(key, config_ ? configured : fallback, min_value, max_value), configured, field);
  }
  // config.json's value where the manifest would refuse the same written: the manifest's ranges
  // hold for the model's own values too (reported at `from`).
  template <typename T>
  void out_of_range(const char* key, T configured, T min_value, T max_value, const char* field) {
    view_.report_error("from", config_file_ + "'s " + field + " = " + (std::ostringstream() << configured).str() +
                                   " is outside the range of " + key + " (" +
                                   (std::ostringstream() << min_value).str() + " to " +
                                   (std::ostringstream() << max_value).str() + ")");
  }
  bool flag(const char* key, bool fallback, bool configured, const char* field) {
    return agree(key, view_.get_bool(key, config_ ? configured : fallback), configured, field);
  }

 private:
  ConfigView& view_;
  const HfModelConfig* config_;
  std::string config_file_;
  bool shape_as_written_ = false;
  std::function<bool()> no_problems_yet_;
};

}  // namespace strata
