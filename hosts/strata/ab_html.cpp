// The HTML report: one file, inline SVG only, so it opens offline and can be attached to a paper.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>

#include "ab_report.hpp"
#include "html_support.hpp"
#include "timeline_svg.hpp"

namespace strata {

namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;
  bool markers = false;  // points only (validation losses)
  double width = 2.0;
  bool dashed = false;
};

// A line chart with labelled axes; y_format renders tick values.
std::string line_chart(const std::string& title, const std::string& x_label, const std::vector<Series>& series,
                       std::string (*y_format)(double), bool y_from_zero = false) {
  constexpr double kWidth = 760, kHeight = 300, kLeft = 80, kRight = 20, kTop = 34, kBottom = 46;
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min, y_max = -x_min;
  for (const Series& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x_min = std::min(x_min, x), x_max = std::max(x_max, x), y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << kHeight << "' viewBox='0 0 "
      << kWidth << ' ' << kHeight << "'>\n<text x='" << kLeft << "' y='20' font-size='15' font-weight='bold'>"
      << html_escape(title) << "</text>\n";
  if (!std::isfinite(x_min)) return svg.str() + "<text x='80' y='120'>no data</text></svg>\n";
  if (x_max == x_min) x_max = x_min + 1;
  if (y_max == y_min) y_max = y_min + 1;
  const double pad = 0.05 * (y_max - y_min);
  y_min = y_from_zero ? 0.0 : y_min - pad;
  y_max += pad;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x_min) / (x_max - x_min) * plot_w; };
  auto py = [&](double y) { return kTop + (1.0 - (y - y_min) / (y_max - y_min)) * plot_h; };
  svg << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << plot_w << "' height='" << plot_h
      << "' fill='none' stroke='#999'/>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    const double y = y_min + (y_max - y_min) * tick / 4.0;
    svg << "<line x1='" << kLeft << "' x2='" << kLeft + plot_w << "' y1='" << py(y) << "' y2='" << py(y)
        << "' stroke='#eee'/><text x='" << kLeft - 6 << "' y='" << py(y) + 4 << "' font-size='11' text-anchor='end'>"
        << y_format(y) << "</text>\n";
    const double x = x_min + (x_max - x_min) * tick / 4.0;
    svg << "<text x='" << px(x) << "' y='" << kTop + plot_h + 16 << "' font-size='11' text-anchor='middle'>"
        << fixed_number(x, 0) << "</text>\n";
  }
  svg << "<text x='" << kLeft + plot_w / 2 << "' y='" << kHeight - 8 << "' font-size='12' text-anchor='middle'>"
      << html_escape(x_label) << "</text>\n";
  int legend_entries = 0;
  for (const Series& s : series) {
    if (s.markers) {
      for (const auto& [x, y] : s.points)
        if (std::isfinite(y))
          svg << "<circle cx='" << px(x) << "' cy='" << py(y) << "' r='4' fill='" << s.color << "'/>\n";
    } else {
      svg << "<polyline fill='none' stroke='" << s.color << "' stroke-width='" << s.width
          << (s.dashed ? "' stroke-dasharray='6 4" : "") << "' points='";
      for (const auto& [x, y] : s.points)
        if (std::isfinite(y)) svg << fixed_number(px(x), 1) << ',' << fixed_number(py(y), 1) << ' ';
      svg << "'/>\n";
    }
    if (s.name.empty()) continue;  // drawn without a legend entry
    const double legend_y = kTop + 14 + 15 * static_cast<double>(legend_entries++);
    svg << "<rect x='" << kLeft + plot_w - 190 << "' y='" << legend_y - 9 << "' width='10' height='"
        << (s.dashed ? 3 : 10) << "' fill='" << s.color << "'/><text x='" << kLeft + plot_w - 175 << "' y='" << legend_y
        << "' font-size='11'>" << html_escape(s.name) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string loss_format(double value) {
  return fixed_number(value, 2);
}
std::string mib_format(double value) {
  return mib_text(value);
}

// One horizontal bar per run: each category's peak device bytes stacked, and a black tick at the
// peak of the total. Categories peak at different moments of a step, so the stack can reach past
// the tick; the gap is memory that is never live all at once.
std::string stacked_memory_bars(const std::vector<AbRun>& runs) {
  constexpr double kWidth = 560, kLeft = 130, kRight = 110, kTop = 34, kBar = 26, kGap = 14;
  const double plot_w = kWidth - kLeft - kRight;
  double scale = 1.0;
  for (const AbRun& run : runs) {
    double sum = 0.0;
    for (std::uint64_t bytes : run.peak_device_bytes_by_category) sum += static_cast<double>(bytes);
    scale = std::max({scale, sum, static_cast<double>(run.peak_device_bytes)});
  }
  const double legend_y = kTop + static_cast<double>(runs.size()) * (kBar + kGap) + 8;
  const double height = legend_y + 24;
  std::ostringstream svg;
  svg << "<svg class='memory-bars' xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << height
      << "' viewBox='0 0 " << kWidth << ' ' << height << "'>\n<text x='10' y='20' font-size='15' font-weight='bold'>"
      << "peak device memory by category</text>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const AbRun& run = runs[i];
    const double y = kTop + static_cast<double>(i) * (kBar + kGap);
    svg << "<text x='" << kLeft - 8 << "' y='" << y + kBar / 2 + 4 << "' font-size='12' text-anchor='end' fill='"
        << kColors[i % std::size(kColors)] << "'>" << html_escape(run.label) << "</text>\n";
    if (!run.complete) {
      svg << "<text x='" << kLeft << "' y='" << y + kBar / 2 + 4 << "' font-size='12'>no summary (failed)</text>\n";
      continue;
    }
    double x = kLeft;
    for (MemoryCategory category : kAllMemoryCategories) {
      const double bytes = static_cast<double>(run.peak_device_bytes_by_category[category_index(category)]);
      if (bytes <= 0) continue;
      const double w = bytes / scale * plot_w;
      svg << "<rect class='category-" << category_name(category) << "' x='" << fixed_number(x, 2) << "' y='" << y
          << "' width='" << fixed_number(w, 2) << "' height='" << kBar << "' fill='" << category_color(category)
          << "'><title>" << html_escape(run.label) << ": " << category_name(category) << " " << mib_format(bytes)
          << " at its peak</title></rect>\n";
      x += w;
    }
    const double peak_x = kLeft + static_cast<double>(run.peak_device_bytes) / scale * plot_w;
    svg << "<line x1='" << fixed_number(peak_x, 2) << "' x2='" << fixed_number(peak_x, 2) << "' y1='" << y - 4
        << "' y2='" << y + kBar + 4 << "' stroke='#000' stroke-width='2'><title>peak of the total: "
        << mib_format(static_cast<double>(run.peak_device_bytes)) << "</title></line>\n";
    svg << "<text x='" << fixed_number(std::max(x, peak_x) + 6, 2) << "' y='" << y + kBar / 2 + 4 << "' font-size='11'>"
        << mib_format(static_cast<double>(run.peak_device_bytes)) << "</text>\n";
  }
  double x = 10;
  for (MemoryCategory category : kAllMemoryCategories) {
    svg << "<rect x='" << x << "' y='" << legend_y << "' width='10' height='10' fill='" << category_color(category)
        << "'/><text x='" << x + 14 << "' y='" << legend_y + 9 << "' font-size='11'>" << category_name(category)
        << "</text>\n";
    x += 24 + 7.0 * static_cast<double>(category_name(category).size());
  }
  svg << "<line x1='" << x << "' x2='" << x << "' y1='" << legend_y - 2 << "' y2='" << legend_y + 12
      << "' stroke='#000' stroke-width='2'/><text x='" << x + 6 << "' y='" << legend_y + 9
      << "' font-size='11'>peak of the total</text>\n</svg>\n";
  return svg.str();
}

std::uint64_t total(const CategoryBytes& bytes) {
  std::uint64_t sum = 0;
  for (std::uint64_t b : bytes) sum += b;
  return sum;
}

}  // namespace

void write_ab_html(std::ostream& out, const std::vector<AbRun>& runs, const std::vector<AbVerdict>& verdicts,
                   const AbSettings& settings) {
  out << html_page_start("strata ab report") << "<h1>strata ab</h1>\n";
  out << "<h2>Comparison</h2>\n<pre>";
  std::ostringstream table;
  print_ab_table(table, runs, verdicts);
  table << '\n';
  print_ab_verdicts(table, runs, verdicts, settings);
  out << html_escape(table.str())
      << "</pre>\n<h2>Runs</h2>\n<table><tr><th>run</th><th>manifest</th><th>stack</th><th>verdict</th></tr>\n";
  for (std::size_t i = 0; i < runs.size(); ++i)
    out << "<tr><td style='color:" << kColors[i % std::size(kColors)] << "'>" << html_escape(runs[i].label)
        << "</td><td>" << html_escape(runs[i].manifest.string()) << "</td><td>" << html_escape(runs[i].stack)
        << "</td><td class='verdict'>" << html_escape(verdicts[i].text) << "</td></tr>\n";
  out << "</table>\n<h2>Loss</h2>\n";
  std::vector<Series> losses;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string color = kColors[i % std::size(kColors)];
    Series train{runs[i].label + " train", color, {}, false, runs.size() > 1 && i == 0 ? 4.0 : 1.5};
    Series val{runs[i].label + " val", color, {}, true};
    for (const AbStep& step : runs[i].steps) {
      train.points.emplace_back(static_cast<double>(step.step), step.loss);
      if (step.val_loss) val.points.emplace_back(static_cast<double>(step.step), *step.val_loss);
    }
    losses.push_back(train);
    if (!val.points.empty()) losses.push_back(val);
  }
  out << line_chart("training loss (lines) and validation loss (dots)", "step", losses, loss_format);
  out << "<h2>Device memory</h2>\n<p>Left: each run's peak device memory, every category at its own peak, "
         "stacked; the black tick is the peak of the total (categories peak at different moments, so the stack "
         "can pass the tick). Right: per step, the peak within the step (solid) and what stays live at its end "
         "(dashed), the state kept from one step to the next. A step with fixed "
         "shapes allocates the same buffers every time, so both lines are flat once training runs; a line that "
         "rises is memory that a step does not give back.</p>\n<div class='row'>\n";
  out << stacked_memory_bars(runs);
  std::vector<Series> totals;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    Series peak{runs[i].label, kColors[i % std::size(kColors)], {}, false, 2.0};
    Series live{"", kColors[i % std::size(kColors)], {}, false, 1.5, true};
    for (const AbStep& step : runs[i].steps) {
      peak.points.emplace_back(static_cast<double>(step.step), static_cast<double>(step.peak_device_bytes));
      live.points.emplace_back(static_cast<double>(step.step), static_cast<double>(total(step.device_bytes)));
    }
    totals.push_back(peak);
    totals.push_back(live);
  }
  out << line_chart("per step: peak within the step (solid), live at its end (dashed)", "step", totals, mib_format,
                    true);
  out << "</div>\n<h3>Per run, by category: the peak within each step</h3>\n";
  for (const AbRun& run : runs) {
    std::vector<Series> memory;
    Series peak{"total", "#000", {}, false, 2.5};
    for (const AbStep& step : run.steps)
      peak.points.emplace_back(static_cast<double>(step.step), static_cast<double>(step.peak_device_bytes));
    memory.push_back(peak);
    for (MemoryCategory category : kAllMemoryCategories) {
      Series s{std::string(category_name(category)), category_color(category), {}, false, 1.5};
      bool any = false;
      for (const AbStep& step : run.steps) {
        const auto bytes = step.peak_device_bytes_by_category[category_index(category)];
        any |= bytes > 0;
        s.points.emplace_back(static_cast<double>(step.step), static_cast<double>(bytes));
      }
      if (any) memory.push_back(s);
    }
    out << line_chart(run.label + " — peak device memory within each step, by category", "step", memory, mib_format,
                      true);
  }
  out << "<h2>Within one step: predicted and measured</h2>\n<p>Each run's device and host memory through "
         "one step, every category stacked, the passes shaded: on the left as <code>strata plan</code>'s dry run "
         "predicts it, on the right as the run measured it. Both show the same step (the run's third, or its last "
         "when it has fewer), after every allocation and release, on one scale; hover for where in the step a point "
         "is and what it holds.</p>\n";
  for (const AbRun& run : runs) {
    out << "<h3>" << html_escape(run.label) << "</h3>\n";
    if (!run.timeline_note.empty()) out << "<p>" << html_escape(run.timeline_note) << "</p>\n";
    for (TimelineHome home : {TimelineHome::device, TimelineHome::host}) {
      const char* home_name = home == TimelineHome::device ? "device" : "host";
      std::uint64_t top = 0;
      for (const std::optional<MemoryTimeline>* timeline : {&run.predicted_timeline, &run.measured_timeline})
        if (*timeline) top = std::max(top, timeline_peak(**timeline, home));
      out << "<div class='row'>\n";
      if (run.predicted_timeline)
        out << timeline_svg(*run.predicted_timeline, home, std::string(home_name) + ", predicted", top);
      if (run.measured_timeline)
        out << timeline_svg(*run.measured_timeline, home, std::string(home_name) + ", measured", top);
      out << "</div>\n";
    }
  }
  out << "</body></html>\n";
}

}  // namespace strata
