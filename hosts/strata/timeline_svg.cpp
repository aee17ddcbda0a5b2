#include "timeline_svg.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "html_support.hpp"

namespace strata {

namespace {

const CategoryBytes& bytes_of(const MemoryTimeline::Sample& sample, TimelineHome home) {
  return home == TimelineHome::device ? sample.device : sample.host;
}

const char* pass_color(const std::string& pass) {
  if (pass == "forward") return "#e8f1fb";
  if (pass == "head") return "#f1f1f1";
  if (pass == "backward") return "#fdf0e2";
  if (pass == "update") return "#e7f6e7";
  return "#ffffff";
}

std::string where(const MemoryTimeline::Mark& mark) {
  if (mark.pass == "start") return "the step's start";
  if (mark.pass == "head") return "the head (loss)";
  if (mark.layer >= 0) return mark.pass + ", block " + std::to_string(mark.layer);
  if (mark.pass == "forward") return "forward, the embedding";
  if (mark.pass == "backward") return "backward, the embedding";
  return mark.pass;
}

// At most `columns` samples, in order: from each run of consecutive samples the one with the most
// bytes, so no peak is lost to the drawing.
std::vector<std::size_t> columns_of(const MemoryTimeline& timeline, TimelineHome home, std::size_t columns) {
  const std::size_t n = timeline.samples.size();
  std::vector<std::size_t> picked;
  if (n <= columns) {
    for (std::size_t i = 0; i < n; ++i) picked.push_back(i);
    return picked;
  }
  for (std::size_t c = 0; c < columns; ++c) {
    const std::size_t first = c * n / columns, end = (c + 1) * n / columns;
    std::size_t best = first;
    for (std::size_t i = first; i < end; ++i)
      if (total_bytes(bytes_of(timeline.samples[i], home)) > total_bytes(bytes_of(timeline.samples[best], home)))
        best = i;
    picked.push_back(best);
  }
  return picked;
}

}  // namespace

std::uint64_t timeline_peak(const MemoryTimeline& timeline, TimelineHome home) {
  std::uint64_t peak = 0;
  for (const MemoryTimeline::Sample& sample : timeline.samples)
    peak = std::max(peak, total_bytes(bytes_of(sample, home)));
  return peak;
}

std::string timeline_svg(const MemoryTimeline& timeline, TimelineHome home, const std::string& title,
                         std::uint64_t y_max) {
  constexpr double kWidth = 620, kHeight = 300, kLeft = 78, kRight = 12, kTop = 44, kBottom = 62;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  std::ostringstream svg;
  svg << "<svg class='timeline' xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << kHeight
      << "' viewBox='0 0 " << kWidth << ' ' << kHeight << "'>\n<text x='8' y='18' font-size='14' font-weight='bold'>"
      << html_escape(title) << "</text>\n";
  if (timeline.samples.empty()) return svg.str() + "<text x='80' y='120'>no samples</text></svg>\n";
  const std::vector<std::size_t> columns = columns_of(timeline, home, static_cast<std::size_t>(plot_w));
  const std::uint64_t peak = timeline_peak(timeline, home);
  const double top = static_cast<double>(std::max<std::uint64_t>({y_max, peak, 1}));
  const double step_x = plot_w / static_cast<double>(std::max<std::size_t>(columns.size() - 1, 1));
  auto px = [&](std::size_t column) { return kLeft + static_cast<double>(column) * step_x; };
  auto py = [&](double bytes) { return kTop + (1.0 - bytes / top) * plot_h; };
  const auto mark_of = [&](std::size_t column) -> const MemoryTimeline::Mark& {
    return timeline.marks[timeline.samples[columns[column]].mark];
  };

  // The passes, shaded behind the areas, named where there is room.
  for (std::size_t first = 0; first < columns.size();) {
    std::size_t end = first + 1;
    while (end < columns.size() && mark_of(end).pass == mark_of(first).pass) ++end;
    const double x0 = first == 0 ? kLeft : px(first) - step_x / 2,
                 x1 = end == columns.size() ? kLeft + plot_w : px(end) - step_x / 2;
    svg << "<rect x='" << fixed_number(x0, 1) << "' y='" << kTop << "' width='" << fixed_number(x1 - x0, 1)
        << "' height='" << plot_h << "' fill='" << pass_color(mark_of(first).pass) << "'/>\n";
    if (x1 - x0 > 44)
      svg << "<text x='" << fixed_number((x0 + x1) / 2, 1) << "' y='" << kTop - 5
          << "' font-size='10' text-anchor='middle' fill='#555'>" << html_escape(mark_of(first).pass) << "</text>\n";
    first = end;
  }
  // One area per category, stacked in the categories' order.
  std::vector<double> below(columns.size(), 0.0);
  CategoryBytes drawn{};  // 1 for the categories drawn, which the legend names
  for (MemoryCategory category : kAllMemoryCategories) {
    const std::size_t index = category_index(category);
    bool any = false;
    for (std::size_t c : columns) any |= bytes_of(timeline.samples[c], home)[index] > 0;
    if (!any) continue;
    drawn[index] = 1;
    std::vector<double> above(below);
    for (std::size_t c = 0; c < columns.size(); ++c)
      above[c] += static_cast<double>(bytes_of(timeline.samples[columns[c]], home)[index]);
    svg << "<polygon fill='" << category_color(category) << "' fill-opacity='0.85' points='";
    for (std::size_t c = 0; c < columns.size(); ++c)
      svg << fixed_number(px(c), 1) << ',' << fixed_number(py(above[c]), 1) << ' ';
    for (std::size_t c = columns.size(); c-- > 0;)
      svg << fixed_number(px(c), 1) << ',' << fixed_number(py(below[c]), 1) << ' ';
    svg << "'><title>" << category_name(category) << "</title></polygon>\n";
    below = std::move(above);
  }
  // Axes: bytes on the left, the step's allocations and releases along the bottom.
  svg << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << plot_w << "' height='" << plot_h
      << "' fill='none' stroke='#999'/>\n";
  for (int tick = 0; tick <= 4; ++tick) {
    const double bytes = top * tick / 4.0;
    svg << "<text x='" << kLeft - 5 << "' y='" << fixed_number(py(bytes) + 4, 1)
        << "' font-size='10' text-anchor='end'>" << mib_text(bytes) << "</text>\n";
  }
  svg << "<text x='" << kLeft + plot_w / 2 << "' y='" << kTop + plot_h + 14
      << "' font-size='11' text-anchor='middle'>step " << timeline.step << ": its " << timeline.samples.size() - 1
      << " allocations and releases, in order</text>\n";
  // The peak, and a hover target per column naming where it is and what it holds.
  std::size_t peak_column = 0;
  for (std::size_t c = 0; c < columns.size(); ++c)
    if (total_bytes(bytes_of(timeline.samples[columns[c]], home)) == peak) {
      peak_column = c;
      break;
    }
  svg << "<line x1='" << fixed_number(px(peak_column), 1) << "' x2='" << fixed_number(px(peak_column), 1) << "' y1='"
      << kTop << "' y2='" << kTop + plot_h << "' stroke='#000' stroke-dasharray='4 3'/>\n<text x='"
      << fixed_number(std::min(px(peak_column) + 4, kLeft + plot_w - 150), 1) << "' y='" << kTop + 12
      << "' font-size='11'>peak " << mib_text(static_cast<double>(peak)) << ": "
      << html_escape(where(mark_of(peak_column))) << "</text>\n";
  for (std::size_t c = 0; c < columns.size(); ++c) {
    const CategoryBytes& bytes = bytes_of(timeline.samples[columns[c]], home);
    svg << "<rect x='" << fixed_number(px(c) - step_x / 2, 1) << "' y='" << kTop << "' width='"
        << fixed_number(step_x, 2) << "' height='" << plot_h << "' fill='transparent'><title>"
        << html_escape(where(mark_of(c))) << ": " << mib_text(static_cast<double>(total_bytes(bytes)));
    for (MemoryCategory category : kAllMemoryCategories)
      if (bytes[category_index(category)] > 0)
        svg << "\n" << category_name(category) << ' ' << mib_text(static_cast<double>(bytes[category_index(category)]));
    svg << "</title></rect>\n";
  }
  // The legend: the categories drawn, then the passes.
  double x = 8;
  const double legend_y = kHeight - 22;
  for (MemoryCategory category : kAllMemoryCategories) {
    if (drawn[category_index(category)] == 0) continue;
    svg << "<rect x='" << x << "' y='" << legend_y << "' width='10' height='10' fill='" << category_color(category)
        << "'/><text x='" << x + 13 << "' y='" << legend_y + 9 << "' font-size='10'>" << category_name(category)
        << "</text>\n";
    x += 16 + 5.6 * static_cast<double>(category_name(category).size());
  }
  for (const char* pass : {"forward", "head", "backward", "update"}) {
    svg << "<rect x='" << x << "' y='" << legend_y << "' width='10' height='10' stroke='#bbb' fill='"
        << pass_color(pass) << "'/><text x='" << x + 13 << "' y='" << legend_y + 9 << "' font-size='10'>" << pass
        << "</text>\n";
    x += 16 + 5.6 * static_cast<double>(std::string_view(pass).size());
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace strata
