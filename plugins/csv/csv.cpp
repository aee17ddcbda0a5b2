// One CSV row per step; the memory columns are bytes per category at the end of the step.
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class Csv final : public TelemetrySink {
 public:
  Csv(ConfigView& config, HostServices&) {
    path_ = config.get_string("path", "", {});
    if (path_.empty()) config.report_error("path", "needs path = \"runs/name.csv\"");
  }

  Status on_run_start(const RunInfo& info) override {
    return guarded([&]() -> Status {
      const std::filesystem::path path(path_);
      if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
      const bool append = info.start_step > 0 && std::filesystem::exists(path);
      out_.open(path, append ? std::ios::app : std::ios::trunc);
      if (!out_) return Status::error("csv: cannot open '" + path_ + "' for writing");
      if (!append) {
        out_ << "step,phase,loss,val_loss,lr,grad_norm,ms,tokens_per_s,peak_device_bytes,host_bytes,bytes_to_host,"
                "bytes_to_device,transfer_ms,exposed_transfer_ms";
        for (MemoryCategory category : kAllMemoryCategories) out_ << ",device_" << category_name(category);
        out_ << '\n';
      }
      out_.flush();
      if (!out_) return Status::error("csv: cannot write to '" + path_ + "' (disk full or I/O error)");
      return {};
    });
  }

  Status on_step(const StepMetrics& m) override {
    return guarded([&] {
      out_.precision(9);
      out_ << m.step << ',' << phase_name(m.phase) << ',' << m.loss << ',';
      if (m.val_loss) out_ << *m.val_loss;
      out_ << ',' << m.lr << ',' << m.grad_norm << ',' << m.ms << ',' << m.tokens_per_s << ',' << m.peak_device_bytes
           << ',' << m.host_bytes << ',' << m.bytes_to_host << ',' << m.bytes_to_device << ',' << m.transfer_ms << ','
           << m.exposed_transfer_ms;
      for (MemoryCategory category : kAllMemoryCategories) out_ << ',' << m.device_bytes[category_index(category)];
      out_ << '\n';
      out_.flush();
      // A row that does not reach the file fails the run: never exit 0 with rows missing.
      if (!out_) throw std::runtime_error("csv: cannot write to '" + path_ + "' (disk full or I/O error)");
    });
  }

  Status on_run_end(const RunSummary&) override { return {}; }

 private:
  std::string path_;
  std::ofstream out_;
};

constexpr const char* kKeys[] = {"path"};
const FactoryDescriptor kFactories[] = {
    make_factory<TelemetrySink, Csv>("csv", "one CSV row per step", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(csv, "1.0.0", kFactories)
