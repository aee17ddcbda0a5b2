#include "plan_prediction.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "core/util/format_bytes.hpp"

namespace strata {

namespace {

std::string categories(const CategoryBytes& bytes) {
  std::string text;
  for (MemoryCategory category : kAllMemoryCategories) {
    const std::uint64_t value = bytes[category_index(category)];
    if (value == 0) continue;
    text += (text.empty() ? "" : ", ") + std::string(category_name(category)) + " " + format_bytes(value);
  }
  return text.empty() ? "nothing" : text;
}

MemoryCategory largest(const CategoryBytes& bytes) {
  return kAllMemoryCategories[static_cast<std::size_t>(std::max_element(bytes.begin(), bytes.end()) - bytes.begin())];
}

void print_home(std::ostream& out, const char* name, const HomePrediction& home) {
  out << "  " << std::left << std::setw(7) << name << format_bytes(home.peak_total);
  if (!home.instant.empty()) out << ", " << home.instant;
  out << '\n';
  if (!home.instant.empty()) out << "         holding " << categories(home.at_peak) << '\n';
  out << "         each category's own peak: " << categories(home.peak) << '\n';
}

nlohmann::json category_json(const CategoryBytes& bytes) {
  nlohmann::json json = nlohmann::json::object();
  for (MemoryCategory category : kAllMemoryCategories)
    json[std::string(category_name(category))] = bytes[category_index(category)];
  return json;
}

nlohmann::json home_json(const HomePrediction& home) {
  nlohmann::json json{{"peak_bytes", home.peak_total}, {"by_category", category_json(home.peak)}};
  if (!home.instant.empty()) {
    json["at_peak"] = category_json(home.at_peak);
    json["instant"] = home.instant;
  }
  return json;
}

}  // namespace

void print_prediction(std::ostream& out, const MemoryPrediction& prediction, const Calibration* calibration) {
  out << "\npredicted peaks (a dry run of " << prediction.steps << " step" << (prediction.steps == 1 ? "" : "s")
      << " and an evaluation pass, every plugin's hooks, nothing computed; " << std::fixed << std::setprecision(2)
      << prediction.seconds << " s; for " << prediction.backend << "):\n";
  print_home(out, "device", prediction.device);
  print_home(out, "host", prediction.host);
  if (prediction.disk) print_home(out, "disk", *prediction.disk);
  out << "  RSS    " << format_bytes(prediction.resident_bytes()) << " (estimate): this process before the dry run "
      << format_bytes(prediction.process_bytes) << ", and the arenas in host memory with their cached blocks;\n"
      << "         not counted: the data as the run holds it, and a library's own buffers as they fill\n";
  if (!prediction.step || calibration == nullptr) {
    out << "step time: not predicted (no calibration at " << default_calibration_path().string()
        << ": run `strata calibrate`)\n";
    return;
  }
  const MemoryPrediction::StepTime& step = *prediction.step;
  out << "predicted step: " << step.total_ms << " ms (ops " << step.ops_ms << ", copies " << step.copies_ms << ", host "
      << step.host_ms;
  if (step.disk_ms > 0.0) out << ", disk " << step.disk_ms << " overlapping them";
  out << ") from " << calibration->path.string() << " (" << calibration->machine << ", " << calibration->threads
      << " threads, " << calibration->measured_at << ")\n";
}

nlohmann::json prediction_json(const MemoryPrediction& prediction, const Calibration* calibration) {
  nlohmann::json json{{"device", home_json(prediction.device)},
                      {"host", home_json(prediction.host)},
                      {"resident_bytes", prediction.resident_bytes()},
                      {"process_bytes", prediction.process_bytes},
                      {"steps", prediction.steps},
                      {"seconds", prediction.seconds},
                      {"backend", prediction.backend},
                      {"over_limit", prediction.over_limit ? nlohmann::json(*prediction.over_limit) : nullptr}};
  if (prediction.disk) json["disk"] = home_json(*prediction.disk);
  json["step_ms"] = nullptr;
  if (prediction.step && calibration != nullptr) {
    const MemoryPrediction::StepTime& step = *prediction.step;
    json["step_ms"] = step.total_ms;
    json["step_ops_ms"] = step.by_op_ms;
    json["step_parts_ms"] = {
        {"ops", step.ops_ms}, {"copies", step.copies_ms}, {"host", step.host_ms}, {"disk", step.disk_ms}};
    json["calibration"] = {{"path", calibration->path.string()},
                           {"machine", calibration->machine},
                           {"threads", calibration->threads},
                           {"measured_at", calibration->measured_at}};
  }
  return json;
}

std::optional<std::string> over_limit_warning(const MemoryPrediction& prediction, std::uint64_t memory_limit) {
  if (memory_limit == 0 || prediction.device.peak_total <= memory_limit) return std::nullopt;
  const MemoryCategory dominant = largest(prediction.device.at_peak);
  return "warning: the predicted device peak, " + format_bytes(prediction.device.peak_total) +
         ", exceeds [device] memory_limit = " + format_bytes(memory_limit) + " (" + prediction.device.instant + "); " +
         std::string(category_name(dominant)) + " dominate it with " +
         format_bytes(prediction.device.at_peak[category_index(dominant)]) + " (" +
         categories(prediction.device.at_peak) + "): the run would stop at step 1";
}

void print_rank_predictions(std::ostream& out, int zero, const std::vector<MemoryPrediction>& ranks,
                            const MemoryPrediction& replicated) {
  const int n = static_cast<int>(ranks.size());
  const auto cell = [&](std::uint64_t bytes) {  // 0: no figure
    std::ostringstream text;
    text << std::right << std::setw(12) << (bytes == 0 ? std::string("-") : format_bytes(bytes));
    return text.str();
  };
  const auto peak = [](const MemoryPrediction& prediction, MemoryCategory category) {
    return prediction.device.peak[category_index(category)];
  };
  out << "\npredicted device peaks per rank, " << n << " ranks at [distributed] zero = " << zero
      << " (a dry run of each rank, as `strata plan` runs one; each category's own peak):\n"
      << "  rank         peak     weights   gradients   optimizer activations\n";
  const auto row = [&](const std::string& name, std::uint64_t total, std::uint64_t weights, std::uint64_t grads,
                       std::uint64_t optimizer, std::uint64_t activations) {
    out << "  " << std::left << std::setw(7) << name << cell(total) << cell(weights) << cell(grads) << cell(optimizer)
        << cell(activations) << '\n';
  };
  for (int r = 0; r < n; ++r) {
    const MemoryPrediction& p = ranks[static_cast<std::size_t>(r)];
    row(std::to_string(r), p.device.peak_total, peak(p, MemoryCategory::weights), peak(p, MemoryCategory::grads),
        peak(p, MemoryCategory::optimizer), peak(p, MemoryCategory::activations));
  }
  const std::uint64_t split = static_cast<std::uint64_t>(n);
  const std::uint64_t grads = peak(replicated, MemoryCategory::grads);
  const std::uint64_t optimizer = peak(replicated, MemoryCategory::optimizer);
  const std::uint64_t weights = peak(replicated, MemoryCategory::weights);
  row("ideal", 0, zero >= 3 ? weights / split : weights, zero >= 2 ? grads / split : grads,
      zero >= 1 ? optimizer / split : optimizer, peak(replicated, MemoryCategory::activations));
  out << "  (ideal: zero 0's rank with the optimizer state"
      << (zero >= 3   ? ", the gradients and the weights"
          : zero >= 2 ? " and the gradients"
                      : "")
      << (zero >= 1 ? " divided by " + std::to_string(n) : std::string(" as they are"))
      << "; a rank owns whole parameters, so the split is as even as their sizes allow, and a zero 2 rank holds "
         "each block's gradients from its backward to their sum, the embeddings' through the whole backward)\n"
      << "  (not in these peaks: rank 0 also holds one row of another rank's at a time while it writes a "
         "save)\n";
}

}  // namespace strata
