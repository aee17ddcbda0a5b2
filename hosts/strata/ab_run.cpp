#include "ab_run.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/util/median.hpp"

namespace strata {

namespace {

CategoryBytes read_categories(const nlohmann::json& object) {
  CategoryBytes bytes{};
  for (MemoryCategory category : kAllMemoryCategories)
    bytes[category_index(category)] = object.value(std::string(category_name(category)), std::uint64_t{0});
  return bytes;
}

// A loss: JSON has no NaN or infinity, so a non-finite loss was written as null.
double loss_value(const nlohmann::json& value) {
  return value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>();
}

constexpr std::int64_t kMaxRanks = 1024;  // as `strata ab --ranks` allows

}  // namespace

AbRun read_ab_run(const std::filesystem::path& jsonl) {
  AbRun run;
  std::ifstream in(jsonl);
  if (!in) return run;  // the child never got as far as its first record
  std::string line;
  int line_number = 0;
  std::vector<std::vector<double>> communication_ms, hidden_ms;  // per rank, per step
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
      if (record.contains("final_loss")) run.final_loss = loss_value(record["final_loss"]);
      if (record.contains("final_val_loss")) run.final_val_loss = loss_value(record["final_val_loss"]);
      run.bytes_to_host = record.value("bytes_to_host", std::uint64_t{0});
      run.bytes_to_device = record.value("bytes_to_device", std::uint64_t{0});
      run.transfer_ms = record.value("transfer_ms", 0.0);
      run.exposed_transfer_ms = record.value("exposed_transfer_ms", 0.0);
      run.backward_passes = record.value("backward_passes", record.value("steps", std::int64_t{0}));
      run.predict_steps = record.value("predict_steps", std::int64_t{0});
      run.rollbacks = record.value("rollbacks", std::int64_t{0});
      run.predictor_ms = record.value("predictor_ms", 0.0);
      run.predictor_bytes = record.value("predictor_host_bytes", std::uint64_t{0}) +
                            record.value("predictor_device_bytes", std::uint64_t{0});
    } else {
      AbStep step;
      step.step = record.at("step").get<std::int64_t>();
      step.loss = loss_value(record.at("loss"));
      if (record.contains("val_loss")) step.val_loss = loss_value(record["val_loss"]);
      step.ms = record.value("ms", 0.0);
      step.peak_device_bytes = record.value("peak_device_bytes", std::uint64_t{0});
      step.peak_device_bytes_by_category =
          read_categories(record.value("peak_device_bytes_by_category", nlohmann::json::object()));
      step.device_bytes = read_categories(record.value("device_bytes", nlohmann::json::object()));
      step.host_bytes = record.value("host_bytes", std::uint64_t{0});
      run.steps.push_back(step);
      for (const nlohmann::json& entry : record.value("ranks", nlohmann::json::array())) {
        const nlohmann::json& rank_number = entry.at("rank");
        const std::int64_t number = rank_number.is_number_integer() ? rank_number.get<std::int64_t>() : -1;
        if (number < 0 || number >= kMaxRanks)
          throw std::runtime_error(jsonl.string() + ":" + std::to_string(line_number) + ": rank " + rank_number.dump() +
                                   " is not a rank number (0 to " + std::to_string(kMaxRanks - 1) + ")");
        const auto r = static_cast<std::size_t>(number);
        while (run.ranks.size() <= r) run.ranks.push_back(AbRank{static_cast<int>(run.ranks.size())});
        communication_ms.resize(run.ranks.size());
        hidden_ms.resize(run.ranks.size());
        AbRank& rank = run.ranks[r];
        rank.zero = entry.value("zero", 0);
        rank.peak_device_bytes = std::max(rank.peak_device_bytes, entry.value("peak_device_bytes", std::uint64_t{0}));
        const CategoryBytes peaks =
            read_categories(entry.value("peak_device_bytes_by_category", nlohmann::json::object()));
        for (std::size_t c = 0; c < peaks.size(); ++c)
          rank.peak_device_bytes_by_category[c] = std::max(rank.peak_device_bytes_by_category[c], peaks[c]);
        communication_ms[r].push_back(entry.value("communication_ms", 0.0));
        hidden_ms[r].push_back(entry.value("hidden_ms", 0.0));
      }
    }
  }
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {  // medians over the steps, as the run's median_ms
    run.ranks[r].communication_ms = median(communication_ms[r]);
    run.ranks[r].hidden_ms = median(hidden_ms[r]);
  }
  return run;
}

}  // namespace strata
