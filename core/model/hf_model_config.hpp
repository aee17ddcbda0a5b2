#pragma once
// config.json in Strata's terms, and the reader each family reads its own fields with
// (core/model/<family>/; the directory's files are core/checkpoint/hf_directory.hpp's).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/errors/manifest_error.hpp"
#include "core/model/model_shape.hpp"

namespace strata {

// A Hugging Face config.json: its family (Strata's arch, also its model_type), its shape, and
// max_positions (n_positions for GPT-2, max_position_embeddings for the RoPE families).
struct HfModelConfig : ModelShape {
  std::string arch;
  int max_positions = 0;
  // What config.json asks that Strata does not do, said as a warning where it is read (GPT-2's
  // dropouts).
  std::vector<std::string> notes;
};

// config.json's fields, each read with its name in any message: ManifestError naming the file and
// the field.
class HfConfigFields {
 public:
  HfConfigFields(const nlohmann::json& config, std::string file) : config_(config), file_(std::move(file)) {}

  const nlohmann::json& json_object() const { return config_; }
  const std::string& file() const { return file_; }
  [[noreturn]] void refuse(const std::string& field, const std::string& why) const {
    throw ManifestError(file_ + ": " + field + ": " + why);
  }
  bool has(const std::string& field) const { return config_.contains(field) && !config_.at(field).is_null(); }
  int positive_int(const std::string& field) const {
    if (!has(field)) refuse(field, "missing (a whole number above 0)");
    const nlohmann::json& value = config_.at(field);
    if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > (1 << 30))
      refuse(field, value.dump() + " is not a whole number in [1, 2^30]");
    return static_cast<int>(value.get<std::int64_t>());
  }
  int positive_int(const std::string& field, int fallback) const { return has(field) ? positive_int(field) : fallback; }
  // A probability in [0, 1) (dropouts); `fallback` when absent.
  double probability(const std::string& field, double fallback) const {
    if (!has(field)) return fallback;
    const nlohmann::json& value = config_.at(field);
    if (!value.is_number() || !(value.get<double>() >= 0.0 && value.get<double>() < 1.0))
      refuse(field, value.dump() + " is not a probability in [0, 1)");
    return value.get<double>();
  }
  double positive_number(const std::string& field, double fallback) const {
    if (!has(field)) return fallback;
    const nlohmann::json& value = config_.at(field);
    if (!value.is_number() || !(value.get<double>() > 0.0)) refuse(field, value.dump() + " is not a number above 0");
    return value.get<double>();
  }
  bool flag(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    if (!config_.at(field).is_boolean()) refuse(field, config_.at(field).dump() + " is not true or false");
    return config_.at(field).get<bool>();
  }
  std::string text(const std::string& field, const std::string& fallback) const {
    if (!has(field)) return fallback;
    if (!config_.at(field).is_string()) refuse(field, config_.at(field).dump() + " is not a string");
    return config_.at(field).get<std::string>();
  }
  // A field whose only value Strata implements is `expected` (absent counts as it).
  template <typename T>
  void require(const std::string& field, const T& expected, const std::string& why) const {
    if (!has(field)) return;
    const nlohmann::json& value = config_.at(field);
    if (value != nlohmann::json(expected)) refuse(field, value.dump() + " is not implemented: " + why);
  }

 private:
  const nlohmann::json& config_;
  std::string file_;
};

}  // namespace strata
