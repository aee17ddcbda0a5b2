#include "ab_run.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace strata {

namespace {

CategoryBytes read_categories(const nlohmann::json& object) {
  CategoryBytes bytes{};
  for (MemoryCategory category : kAllMemoryCategories)
    bytes[category_index(category)] = object.value(std::string(category_name(category)), std::uint64_t{0});
  return bytes;
}

std::string scientific(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

}  // namespace

AbRun read_ab_run(const std::filesystem::path& jsonl) {
  AbRun run;
  std::ifstream in(jsonl);
  if (!in) return run;  // the child never got as far as its first record
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(jsonl.string() + ":" + std::to_string(line_number) + ": " + e.what());
    }
    const std::string kind = record.value("record", "step");
    if (kind == "run") {
      run.stack = record.value("stack", "");
    } else if (kind == "summary") {
      run.complete = true;
      run.peak_device_bytes = record.value("peak_device_bytes", std::uint64_t{0});
      run.peak_device_bytes_by_category =
          read_categories(record.value("peak_device_bytes_by_category", nlohmann::json::object()));
      run.peak_host_bytes = record.value("peak_host_bytes", std::uint64_t{0});
      run.median_ms = record.value("median_ms", 0.0);
      run.tokens_per_s = record.value("tokens_per_s", 0.0);
      run.final_loss = record.value("final_loss", 0.0);
      if (record.contains("final_val_loss")) run.final_val_loss = record["final_val_loss"].get<double>();
      run.bytes_to_host = record.value("bytes_to_host", std::uint64_t{0});
      run.bytes_to_device = record.value("bytes_to_device", std::uint64_t{0});
      run.transfer_ms = record.value("transfer_ms", 0.0);
      run.exposed_transfer_ms = record.value("exposed_transfer_ms", 0.0);
    } else {
      AbStep step;
      step.step = record.at("step").get<std::int64_t>();
      step.loss = record.at("loss").get<double>();
      if (record.contains("val_loss")) step.val_loss = record["val_loss"].get<double>();
      step.ms = record.value("ms", 0.0);
      step.peak_device_bytes = record.value("peak_device_bytes", std::uint64_t{0});
      step.peak_device_bytes_by_category =
          read_categories(record.value("peak_device_bytes_by_category", nlohmann::json::object()));
      step.host_bytes = record.value("host_bytes", std::uint64_t{0});
      run.steps.push_back(step);
    }
  }
  return run;
}

AbVerdict compare_runs(const AbRun& reference, const AbRun& run, double tolerance) {
  AbVerdict verdict;
  if (run.exit_code != 0 || !run.complete) {
    verdict.kind = AbVerdict::Kind::failed;
    verdict.text = "failed (exit " + std::to_string(run.exit_code) + ")";
    return verdict;
  }
  if (run.steps.size() != reference.steps.size()) {
    verdict.kind = AbVerdict::Kind::diverged;
    verdict.text = "diverged (" + std::to_string(run.steps.size()) + " steps against " +
                   std::to_string(reference.steps.size()) + ")";
    return verdict;
  }
  bool bitwise = true;
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    const double a = reference.steps[i].loss, b = run.steps[i].loss;
    bitwise &= a == b;
    const double relative = std::abs(a - b) / std::max(std::abs(a), 1e-12);
    if (!(relative <= verdict.max_relative_difference)) {  // NaN counts as the worst
      verdict.max_relative_difference = std::isnan(relative) ? INFINITY : relative;
      verdict.worst_step = run.steps[i].step;
    }
  }
  if (bitwise) {
    verdict.kind = AbVerdict::Kind::identical;
    verdict.text = "identical";
  } else if (verdict.max_relative_difference <= tolerance) {
    verdict.kind = AbVerdict::Kind::within_tolerance;
    verdict.text = "within tolerance (max rel. loss diff " + scientific(verdict.max_relative_difference) +
                   " <= " + scientific(tolerance) + ")";
  } else {
    verdict.kind = AbVerdict::Kind::diverged;
    verdict.text = "diverged (rel. loss diff " + scientific(verdict.max_relative_difference) + " at step " +
                   std::to_string(verdict.worst_step) + ")";
  }
  return verdict;
}

}  // namespace strata
