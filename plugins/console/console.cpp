// A live progress line (step/total, loss, tokens/s, ms/step, peak device MiB, ETA) and a summary
// table at the end. On a terminal the line redraws in place; otherwise a line is logged every
// `every` steps so CI logs stay short.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "strata/plugin.hpp"

namespace {

using namespace strata;

double mib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

std::string eta_text(double seconds) {
  // train.steps may be as large as INT64_MAX: past 10^5 hours (or not finite) the ETA is only
  // "long", and converting it to an integer would overflow.
  constexpr double kLongest = 1e5 * 3600.0;
  if (!(seconds < kLongest)) return ">100000h";
  char text[32];
  const auto total = static_cast<long long>(std::max(seconds, 0.0) + 0.5);
  std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", total / 3600, (total / 60) % 60, total % 60);
  return text;
}

class Console final : public TelemetrySink {
 public:
  Console(ConfigView& config, HostServices&) {
    every_ = config.get_int("every", 10, 1, 1000000);
    const std::string mode = config.get_string("progress", "auto", {"auto", "line", "log"});
    redraw_ = mode == "line" || (mode == "auto" && ::isatty(STDOUT_FILENO));
  }

  Status on_run_start(const RunInfo& info) override {
    return guarded([&] {
      total_ = info.total_steps;
      spdlog::info(
          "training {} | {:.2f}M parameters | {} tokens/step | steps {}..{}{}", info.stack,
          static_cast<double>(info.parameter_count) / 1e6, info.tokens_per_step, info.start_step + 1, info.total_steps,
          info.device_memory_limit ? fmt::format(" | device limit {:.0f} MiB", mib(info.device_memory_limit)) : "");
    });
  }

  Status on_step(const StepMetrics& m) override {
    return guarded([&] {
      elapsed_ms_ += m.ms;
      ++steps_seen_;
      const double eta = elapsed_ms_ / static_cast<double>(steps_seen_) * static_cast<double>(total_ - m.step) / 1000.0;
      std::string line = fmt::format(
          "step {}/{} | loss {:.4f}{} | lr {:.2e} | {:.0f} tok/s | {:.1f} ms/step | peak {:.1f} MiB | ETA {}", m.step,
          m.total_steps, m.loss, m.val_loss ? fmt::format(" | val {:.4f}", *m.val_loss) : std::string(), m.lr,
          m.tokens_per_s, m.ms, mib(m.peak_device_bytes), eta_text(eta));
      if (m.loss_scale != 1.0) line += fmt::format(" | loss scale {:g}", m.loss_scale);
      if (m.skipped) line += " | skipped (non-finite grads)";
      if (m.phase != Phase::full) line += fmt::format(" | {}", phase_name(m.phase));
      if (m.rolled_back) line += " (rolled back)";
      if (redraw_) {
        std::fprintf(stdout, "\r\033[K%s", line.c_str());
        if (m.step == m.total_steps || m.val_loss) std::fputc('\n', stdout);
        std::fflush(stdout);
      } else if (m.step % every_ == 0 || m.step == m.total_steps || m.val_loss || steps_seen_ == 1) {
        spdlog::info("{}", line);
      }
    });
  }

  Status on_run_end(const RunSummary& s) override {
    return guarded([&] {
      std::printf("\n%-28s %s\n", "summary", "");
      std::printf("%-28s %lld\n", "steps", static_cast<long long>(s.steps));
      std::printf("%-28s %.4f -> %.4f\n", "train loss (first -> final)", s.first_loss, s.final_loss);
      if (s.final_val_loss) std::printf("%-28s %.4f\n", "validation loss", *s.final_val_loss);
      if (s.skipped_steps > 0)
        std::printf("%-28s %lld (non-finite gradients)\n", "skipped steps", static_cast<long long>(s.skipped_steps));
      if (s.predict_steps > 0 || s.predictor_ms > 0.0) {
        std::printf("%-28s %lld of %lld steps (%lld predict steps, %lld rolled back)\n", "backward passes",
                    static_cast<long long>(s.backward_passes), static_cast<long long>(s.steps),
                    static_cast<long long>(s.predict_steps), static_cast<long long>(s.rollbacks));
        std::printf("%-28s %.1f s, %.2f MiB host + %.2f MiB device\n", "predictor", s.predictor_ms / 1000.0,
                    mib(s.predictor_host_bytes), mib(s.predictor_device_bytes));
      }
      for (const PluginMemoryUse& use : s.plugin_memory)
        std::printf("%-28s %.2f MiB host + %.2f MiB device, %.2f MiB copied\n",
                    ("plugin " + std::string(use.plugin)).c_str(), mib(use.host_bytes), mib(use.device_bytes),
                    mib(use.bytes_copied));
      std::printf("%-28s %.1f\n", "median ms/step", s.median_ms);
      std::printf("%-28s %.0f\n", "tokens/s (median step)", s.tokens_per_s);
      std::printf("%-28s %.2f MiB\n", "peak device memory", mib(s.peak_device_bytes));
      for (MemoryCategory category : kAllMemoryCategories)
        std::printf("  %-26s %.2f MiB\n", std::string(category_name(category)).c_str(),
                    mib(s.peak_device_bytes_by_category[category_index(category)]));
      if (s.peak_driver_device_bytes > 0)  // the cross-check: arena reserve + context + cuBLAS + other processes
        std::printf("%-28s %.2f MiB (driver, whole device)\n", "peak device memory in use",
                    mib(s.peak_driver_device_bytes));
      std::printf("%-28s %.2f MiB\n", "peak host (offload) memory", mib(s.peak_host_bytes));
      if (s.bytes_to_host + s.bytes_to_device > 0) {
        std::printf("%-28s %.1f MiB to host, %.1f MiB to device\n", "residency transfers", mib(s.bytes_to_host),
                    mib(s.bytes_to_device));
        const double hidden = s.transfer_ms > 0 ? std::clamp(1.0 - s.exposed_transfer_ms / s.transfer_ms, 0.0, 1.0) : 0;
        std::printf("%-28s %.0f ms copying, %.0f ms waited for (%.0f%% hidden behind compute)\n", "transfer time",
                    s.transfer_ms, s.exposed_transfer_ms, 100.0 * hidden);
      }
      std::printf("%-28s %.1f s\n", "wall time", s.seconds);
      std::fflush(stdout);
    });
  }

 private:
  std::int64_t every_ = 10;
  bool redraw_ = false;
  std::int64_t total_ = 0;
  std::int64_t steps_seen_ = 0;
  double elapsed_ms_ = 0.0;
};

constexpr const char* kKeys[] = {"every", "progress"};
const FactoryDescriptor kFactories[] = {
    make_factory<TelemetrySink, Console>("console", "progress line and end-of-run summary", name_list(kKeys))};

}  // namespace

STRATA_DEFINE_PLUGIN(console, "1.0.0", kFactories)
