// A third-party telemetry plugin: an exponential moving average of the training loss, which is
// easier to read than the raw per-batch loss. It writes "step,loss,loss_ema" lines to `path` and
// the final average to the log. It includes only SDK headers, as every plugin must.
#include <cmath>
#include <fstream>
#include <string>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

class LossEma final : public TelemetrySink {
 public:
  LossEma(ConfigView& config, HostServices& host) : host_(host) {
    alpha_ = config.get_double("alpha", 0.1, 1e-6, 1.0);
    path_ = config.get_string("path", "", {});
    if (path_.empty()) config.report_error("path", "needs path = \"runs/name/loss_ema.csv\"");
  }

  Status on_run_start(const RunInfo&) override {
    return guarded([&]() -> Status {
      out_.open(path_, std::ios::trunc);
      if (!out_) return Status::error("loss_ema: cannot open '" + path_ + "' for writing");
      out_ << "step,loss,loss_ema\n";
      return {};
    });
  }

  Status on_step(const StepMetrics& metrics) override {
    return guarded([&] {
      ema_ = std::isnan(ema_) ? metrics.loss : alpha_ * metrics.loss + (1.0 - alpha_) * ema_;
      out_ << metrics.step << ',' << metrics.loss << ',' << ema_ << '\n';
      out_.flush();
    });
  }

  Status on_run_end(const RunSummary& summary) override {
    return guarded([&] {
      host_.log(LogLevel::info, "loss_ema: smoothed training loss " + std::to_string(ema_) + " after " +
                                    std::to_string(summary.steps) + " steps");
    });
  }

 private:
  HostServices& host_;
  double alpha_ = 0.1;
  std::string path_;
  std::ofstream out_;
  double ema_ = NAN;
};

constexpr const char* kKeys[] = {"alpha", "path"};
const FactoryDescriptor kFactories[] = {make_factory<TelemetrySink, LossEma>(
    "loss_ema", "exponential moving average of the training loss", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(loss_ema, "1.0.0", kFactories)
