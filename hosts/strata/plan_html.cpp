#include "plan_html.hpp"

#include <sstream>

#include "html_support.hpp"
#include "plan_prediction.hpp"
#include "timeline_svg.hpp"

namespace strata {

void write_plan_html(std::ostream& out, const Manifest& manifest, const MemoryPrediction& prediction,
                     const Calibration* calibration, const MemoryTimeline& timeline) {
  out << html_page_start("strata plan: " + manifest.path.filename().string()) << "<h1>strata plan "
      << html_escape(manifest.path.string()) << "</h1>\n<pre>";
  std::ostringstream text;
  print_prediction(text, prediction, calibration);
  if (const auto warning = over_limit_warning(prediction, manifest.device.memory_limit)) text << *warning << '\n';
  out << html_escape(text.str()) << "</pre>\n<h2>Within step " << timeline.step
      << "</h2>\n<p>The memory of the step the prediction is made from, after every allocation and release of its "
         "dry run, every category stacked and the passes shaded; hover for where in the step a point is and what "
         "it holds. <code>strata ab --html</code> draws a run's measured step beside this.</p>\n<div class='row'>\n"
      << timeline_svg(timeline, TimelineHome::device, "device, predicted")
      << timeline_svg(timeline, TimelineHome::host, "host, predicted") << "</div>\n</body></html>\n";
}

}  // namespace strata
