#include <algorithm>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <string>

#include "ab_report.hpp"
#include "core/util/format_bytes.hpp"

namespace strata {

namespace {

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// "33.27 MiB (0.57x)": a value and its ratio to the first run's.
std::string with_ratio(const std::string& value, double measured, double reference, bool is_reference) {
  if (is_reference) return value;
  if (reference == 0.0) return measured == 0.0 ? value + " (=)" : value;
  return value + " (" + fixed(measured / reference, 2) + "x)";
}

}  // namespace

void print_ab_table(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts) {
  struct Row {
    std::string name;
    std::vector<std::string> cells;
  };
  std::vector<Row> rows;
  const AbRun& first = runs.front();
  auto numeric_row = [&](const std::string& name, const std::function<double(const AbRun&)>& value,
                         const std::function<std::string(double)>& format) {
    Row row{name, {}};
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (!runs[i].complete) {
        row.cells.push_back("-");
        continue;
      }
      const double measured = value(runs[i]);
      row.cells.push_back(with_ratio(format(measured), measured, value(first), i == 0));
    }
    rows.push_back(row);
  };
  const auto mib = [](double bytes) { return format_mib(static_cast<std::uint64_t>(bytes)) + " MiB"; };
  numeric_row(
      "peak device memory", [](const AbRun& r) { return static_cast<double>(r.peak_device_bytes); }, mib);
  for (MemoryCategory category : kAllMemoryCategories)
    numeric_row(
        "  " + std::string(category_name(category)),
        [category](const AbRun& r) {
          return static_cast<double>(r.peak_device_bytes_by_category[category_index(category)]);
        },
        mib);
  numeric_row(
      "peak host memory", [](const AbRun& r) { return static_cast<double>(r.peak_host_bytes); }, mib);
  numeric_row(
      "median ms/step", [](const AbRun& r) { return r.median_ms; }, [](double v) { return fixed(v, 1); });
  numeric_row(
      "tokens/s", [](const AbRun& r) { return r.tokens_per_s; }, [](double v) { return fixed(v, 0); });
  numeric_row(
      "final train loss", [](const AbRun& r) { return r.final_loss; }, [](double v) { return fixed(v, 4); });
  numeric_row(
      "final val loss", [](const AbRun& r) { return r.final_val_loss.value_or(0.0); },
      [](double v) { return v == 0.0 ? std::string("-") : fixed(v, 4); });
  numeric_row(
      "moved to host", [](const AbRun& r) { return static_cast<double>(r.bytes_to_host); }, mib);
  numeric_row(
      "moved to device", [](const AbRun& r) { return static_cast<double>(r.bytes_to_device); }, mib);
  // A phase controller's rows, when a run has one: what it skipped and what it cost.
  const bool any_predictor = std::any_of(runs.begin(), runs.end(),
                                         [](const AbRun& r) { return r.predict_steps > 0 || r.predictor_bytes > 0; });
  if (any_predictor) {
    numeric_row(
        "backward passes", [](const AbRun& r) { return static_cast<double>(r.backward_passes); },
        [](double v) { return fixed(v, 0); });
    Row predicted{"predict steps (rolled back)", {}};
    for (const AbRun& run : runs)
      predicted.cells.push_back(
          run.complete ? std::to_string(run.predict_steps) + " (" + std::to_string(run.rollbacks) + ")" : "-");
    rows.push_back(predicted);
    numeric_row(
        "predictor time", [](const AbRun& r) { return r.predictor_ms / 1000.0; },
        [](double v) { return fixed(v, 2) + " s"; });
    numeric_row(
        "predictor memory", [](const AbRun& r) { return static_cast<double>(r.predictor_bytes); }, mib);
  }
  Row hidden{"transfer hidden", {}};
  for (const AbRun& run : runs)
    hidden.cells.push_back(
        run.transfer_ms > 0 ? fixed(100.0 * std::clamp(1.0 - run.exposed_transfer_ms / run.transfer_ms, 0.0, 1.0), 0) +
                                  "% of " + fixed(run.transfer_ms, run.transfer_ms < 10 ? 1 : 0) + " ms"
                            : "-");
  rows.push_back(hidden);
  // Data-parallel runs (--ranks): the busiest rank's memory and calls; the rows above are rank 0's.
  if (std::any_of(runs.begin(), runs.end(), [](const AbRun& r) { return !r.ranks.empty(); })) {
    Row ranks{"ranks", {}};
    for (const AbRun& run : runs)
      ranks.cells.push_back(!run.complete       ? std::string("-")
                            : run.ranks.empty() ? std::string("1")
                                                : std::to_string(run.ranks.size()) + ", zero " +
                                                      std::to_string(run.ranks.front().zero));
    rows.push_back(ranks);
    numeric_row(
        "largest rank's peak",
        [](const AbRun& r) {
          std::uint64_t peak = r.ranks.empty() ? r.peak_device_bytes : 0;
          for (const AbRank& rank : r.ranks) peak = std::max(peak, rank.peak_device_bytes);
          return static_cast<double>(peak);
        },
        mib);
    Row calls{"communication/step", {}};
    for (const AbRun& run : runs) {
      double most = 0.0, all = 0.0, hidden_part = 0.0;
      for (const AbRank& rank : run.ranks) {
        most = std::max(most, rank.communication_ms);
        all += rank.communication_ms;
        hidden_part += rank.hidden_ms;
      }
      calls.cells.push_back(run.ranks.empty() || !run.complete
                                ? std::string("-")
                                : fixed(most, most < 10 ? 1 : 0) + " ms, " +
                                      fixed(all > 0 ? 100.0 * hidden_part / all : 0.0, 0) + "% hidden");
    }
    rows.push_back(calls);
  }
  Row verdict{"verdict", {}};
  for (const AbVerdict& v : verdicts) verdict.cells.push_back(v.label);
  rows.push_back(verdict);

  std::size_t name_width = 0;
  std::vector<std::size_t> widths(runs.size(), 0);
  for (std::size_t i = 0; i < runs.size(); ++i) widths[i] = runs[i].label.size();
  for (const Row& row : rows) {
    name_width = std::max(name_width, row.name.size());
    for (std::size_t i = 0; i < row.cells.size(); ++i) widths[i] = std::max(widths[i], row.cells[i].size());
  }
  out << std::left << std::setw(static_cast<int>(name_width)) << "";
  for (std::size_t i = 0; i < runs.size(); ++i) out << "  " << std::setw(static_cast<int>(widths[i])) << runs[i].label;
  out << '\n';
  for (const Row& row : rows) {
    out << std::setw(static_cast<int>(name_width)) << row.name;
    for (std::size_t i = 0; i < row.cells.size(); ++i)
      out << "  " << std::setw(static_cast<int>(widths[i])) << row.cells[i];
    out << '\n';
  }
  out << std::right;
}

void print_ab_verdicts(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts,
                       const AbSettings& settings) {
  const AbRun& reference = runs.front();
  if (reference.failed()) {
    out << "no verdicts: the reference, " << reference.label << ", failed (exit " << reference.exit_code << ")\n";
  } else {
    const std::int64_t k = last_k_for(settings, static_cast<std::int64_t>(reference.steps.size()));
    out << "verdicts against " << reference.label << '\n'
        << "  differences: relative, (run - reference) / reference, of the train loss and of the val loss where "
           "both runs evaluated\n"
        << "  last-k:      the mean over the last " << k << (k == 1 ? " step" : " steps")
        << (settings.last_k ? " (--last-k)" : " (default: min(10, steps/4 rounded up); --last-k sets it)")
        << ", and the worst single step\n"
        << "  tolerance:   " << tolerance_text(settings)
        << (settings.tolerance_given ? "" : ": 1% of the loss, above bf16 storage's rounding; --tolerance sets it")
        << "\n"
        << "  other optimizer settings make an optimizer comparison, another choice of what trains (LoRA, frozen "
           "layers) a training comparison; another model, data, batch, seed or step count makes the losses not "
           "comparable\n";
  }
  std::size_t width = 0;
  for (const AbRun& run : runs) width = std::max(width, run.label.size());
  for (std::size_t i = 0; i < runs.size(); ++i)
    out << "  " << std::left << std::setw(static_cast<int>(width)) << runs[i].label << std::right << "  "
        << verdicts[i].text << '\n';
}

}  // namespace strata
