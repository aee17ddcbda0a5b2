// One JSON object per step (and a header and summary record), flushed per line so a crashed run
// keeps every step it finished.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

nlohmann::ordered_json by_category(const CategoryBytes& bytes) {
  nlohmann::ordered_json object;
  for (MemoryCategory category : kAllMemoryCategories)
    object[std::string(category_name(category))] = bytes[category_index(category)];
  return object;
}

class Jsonl final : public TelemetrySink {
 public:
  Jsonl(ConfigView& config, HostServices&) {
    path_ = config.get_string("path", "", {});
    if (path_.empty()) config.report_error("path", "needs path = \"runs/name.jsonl\"");
  }

  Status on_run_start(const RunInfo& info) override {
    return guarded([&]() -> Status {
      const std::filesystem::path path(path_);
      if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
      if (info.start_step > 0) truncate_after(path, info.start_step);
      out_.open(path, info.start_step > 0 ? std::ios::app : std::ios::trunc);
      if (!out_) return Status::error("jsonl: cannot open '" + path_ + "' for writing");
      write({{"record", "run"},
             {"manifest", info.manifest_path},
             {"stack", info.stack},
             {"total_steps", info.total_steps},
             {"start_step", info.start_step},
             {"tokens_per_step", info.tokens_per_step},
             {"parameter_count", info.parameter_count},
             {"device_memory_limit", info.device_memory_limit}});
      return {};
    });
  }

  Status on_step(const StepMetrics& m) override {
    return guarded([&] {
      nlohmann::ordered_json record = {{"step", m.step}, {"phase", std::string(phase_name(m.phase))}, {"loss", m.loss}};
      if (m.val_loss) record["val_loss"] = *m.val_loss;
      record["lr"] = m.lr;
      record["grad_norm"] = m.grad_norm;
      record["skipped"] = m.skipped;
      record["loss_scale"] = m.loss_scale;
      record["backward"] = m.backward;
      if (m.rolled_back) record["rolled_back"] = true;
      if (m.predictor_ms > 0.0) record["predictor_ms"] = m.predictor_ms;
      record["ms"] = m.ms;
      record["tokens_per_s"] = m.tokens_per_s;
      record["device_bytes"] = by_category(m.device_bytes);
      record["peak_device_bytes"] = m.peak_device_bytes;
      record["peak_device_bytes_by_category"] = by_category(m.peak_device_bytes_by_category);
      record["host_bytes"] = m.host_bytes;
      record["bytes_to_host"] = m.bytes_to_host;
      record["bytes_to_device"] = m.bytes_to_device;
      record["transfer_ms"] = m.transfer_ms;
      record["exposed_transfer_ms"] = m.exposed_transfer_ms;
      // The share of copy time hidden behind compute; absent when nothing moved.
      if (m.transfer_ms > 0.0)
        record["transfer_overlap"] = std::clamp(1.0 - m.exposed_transfer_ms / m.transfer_ms, 0.0, 1.0);
      // The driver's view (a GPU only), beside the arena's accounting above.
      if (m.driver_device_bytes > 0) record["driver_device_bytes"] = m.driver_device_bytes;
      // The disk tier's share of this step (on_step_disk came just before), in runs that have one.
      if (disk_ && disk_->step == m.step) {
        record["disk"] = {{"bytes_read", disk_->bytes_read}, {"bytes_written", disk_->bytes_written},
                          {"busy_ms", disk_->busy_ms},       {"waited_ms", disk_->waited_ms},
                          {"disk_bytes", disk_->disk_bytes}, {"file_bytes", disk_->file_bytes}};
        disk_.reset();
      }
      // Each rank's share of this step (on_step_rank came just before), in data-parallel runs.
      if (!ranks_.empty() && ranks_.front().step == m.step) {
        nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
        for (const RankStepMetrics& r : ranks_)
          ranks.push_back({{"rank", r.rank},
                           {"zero", r.zero},
                           {"communication_ms", r.communication_ms},
                           {"hidden_ms", r.hidden_ms},
                           {"bytes_sent", r.bytes_sent},
                           {"peak_device_bytes", r.peak_device_bytes},
                           {"peak_device_bytes_by_category", by_category(r.peak_device_bytes_by_category)}});
        record["ranks"] = ranks;
      }
      ranks_.clear();
      write(record);
    });
  }

  Status on_step_disk(const DiskStepMetrics& metrics) override {
    disk_ = metrics;
    return {};
  }

  Status on_step_rank(const RankStepMetrics& metrics) override {
    return guarded([&] { ranks_.push_back(metrics); });
  }

  Status on_run_end(const RunSummary& s) override {
    return guarded([&] {
      nlohmann::ordered_json record = {
          {"record", "summary"}, {"steps", s.steps}, {"first_loss", s.first_loss}, {"final_loss", s.final_loss}};
      if (s.final_val_loss) record["final_val_loss"] = *s.final_val_loss;
      record["skipped_steps"] = s.skipped_steps;
      record["backward_passes"] = s.backward_passes;
      record["predict_steps"] = s.predict_steps;
      record["rollbacks"] = s.rollbacks;
      record["predictor_ms"] = s.predictor_ms;
      record["predictor_host_bytes"] = s.predictor_host_bytes;
      record["predictor_device_bytes"] = s.predictor_device_bytes;
      record["median_ms"] = s.median_ms;
      record["tokens_per_s"] = s.tokens_per_s;
      record["peak_device_bytes"] = s.peak_device_bytes;
      record["peak_device_bytes_by_category"] = by_category(s.peak_device_bytes_by_category);
      record["peak_host_bytes"] = s.peak_host_bytes;
      record["bytes_to_host"] = s.bytes_to_host;
      record["bytes_to_device"] = s.bytes_to_device;
      record["transfer_ms"] = s.transfer_ms;
      record["exposed_transfer_ms"] = s.exposed_transfer_ms;
      if (s.peak_driver_device_bytes > 0) record["peak_driver_device_bytes"] = s.peak_driver_device_bytes;
      for (const PluginMemoryUse& use : s.plugin_memory)
        record["plugin_memory"][std::string(use.plugin)] = {
            {"host_bytes", use.host_bytes}, {"device_bytes", use.device_bytes}, {"bytes_copied", use.bytes_copied}};
      write(record);
    });
  }

 private:
  // A resumed run continues the file from its resume step: the records after that step (steps the
  // interrupted run took past its last checkpoint, and its summary) are dropped, so no step appears
  // twice. The file is rewritten beside itself and renamed over, so a crash keeps one whole file.
  static void truncate_after(const std::filesystem::path& path, std::int64_t resume_step) {
    std::ifstream in(path);
    if (!in) return;  // nothing logged yet
    std::vector<std::string> kept;
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
      if (record.is_discarded()) continue;  // a line cut short by a crash
      if (record.contains("step") && record["step"].is_number_integer() &&
          record["step"].get<std::int64_t>() > resume_step)
        break;
      if (record.value("record", "") == "summary") continue;
      kept.push_back(line);
    }
    const std::filesystem::path temporary = path.string() + ".truncating";
    {
      std::ofstream out(temporary, std::ios::trunc);
      for (const std::string& line : kept) out << line << '\n';
      out.flush();
      if (!out) throw std::runtime_error("jsonl: cannot rewrite '" + path.string() + "' for the resumed run");
    }
    std::filesystem::rename(temporary, path);
  }

  // A record that does not reach the file fails the run (guarded turns the throw into a Status):
  // a run must not finish with exit 0 and records missing, as on a full disk.
  void write(const nlohmann::ordered_json& record) {
    out_ << record.dump() << '\n';
    out_.flush();
    if (!out_) throw std::runtime_error("jsonl: cannot write to '" + path_ + "' (disk full or I/O error)");
  }
  std::string path_;
  std::ofstream out_;
  std::optional<DiskStepMetrics> disk_;  // the step's, until on_step writes it
  std::vector<RankStepMetrics> ranks_;   // the step's ranks, likewise
};

constexpr const char* kKeys[] = {"path"};
const FactoryDescriptor kFactories[] = {
    make_factory<TelemetrySink, Jsonl>("jsonl", "one JSON record per step", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(jsonl, "1.0.0", kFactories)
