#include "core/training/memory_timeline.hpp"

#include <fstream>
#include <stdexcept>

#include "core/device/allocator.hpp"
#include "core/executor/executor.hpp"
#include "core/util/atomic_file.hpp"

namespace strata {

namespace {

constexpr std::string_view kFormat = "strata-memory-timeline";
constexpr int kVersion = 1;

}  // namespace

nlohmann::json timeline_json(const MemoryTimeline& timeline) {
  nlohmann::json categories = nlohmann::json::array();
  for (MemoryCategory category : kAllMemoryCategories) categories.push_back(std::string(category_name(category)));
  nlohmann::json marks = nlohmann::json::array();
  for (const MemoryTimeline::Mark& mark : timeline.marks) marks.push_back({mark.pass, mark.layer});
  // One row per sample: [mark, device bytes per category..., host bytes per category...].
  nlohmann::json samples = nlohmann::json::array();
  for (const MemoryTimeline::Sample& sample : timeline.samples) {
    nlohmann::json row = nlohmann::json::array({sample.mark});
    for (std::uint64_t b : sample.device) row.push_back(b);
    for (std::uint64_t b : sample.host) row.push_back(b);
    samples.push_back(std::move(row));
  }
  return {{"format", kFormat},        {"version", kVersion}, {"step", timeline.step},
          {"categories", categories}, {"marks", marks},      {"samples", samples}};
}

MemoryTimeline timeline_from_json(const nlohmann::json& json) {
  try {
    if (json.at("format") != kFormat) throw std::invalid_argument("not a Strata memory timeline");
    if (json.at("version") != kVersion)
      throw std::invalid_argument("version " + json.at("version").dump() + ", this Strata reads " +
                                  std::to_string(kVersion));
    const nlohmann::json& categories = json.at("categories");
    if (categories.size() != kMemoryCategoryCount) throw std::invalid_argument("another set of memory categories");
    for (std::size_t i = 0; i < kMemoryCategoryCount; ++i)
      if (categories[i] != std::string(category_name(kAllMemoryCategories[i])))
        throw std::invalid_argument("another set of memory categories");
    MemoryTimeline timeline;
    timeline.step = json.at("step").get<std::int64_t>();
    for (const nlohmann::json& mark : json.at("marks"))
      timeline.marks.push_back({mark.at(0).get<std::string>(), mark.at(1).get<int>()});
    for (const nlohmann::json& row : json.at("samples")) {
      if (row.size() != 1 + 2 * kMemoryCategoryCount) throw std::invalid_argument("a sample of the wrong size");
      MemoryTimeline::Sample sample;
      sample.mark = row.at(0).get<std::uint32_t>();
      if (sample.mark >= timeline.marks.size()) throw std::invalid_argument("a sample names a mark that is not there");
      for (std::size_t i = 0; i < kMemoryCategoryCount; ++i) {
        sample.device[i] = row.at(1 + i).get<std::uint64_t>();
        sample.host[i] = row.at(1 + kMemoryCategoryCount + i).get<std::uint64_t>();
      }
      timeline.samples.push_back(sample);
    }
    return timeline;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed: ") + e.what());
  }
}

void write_timeline(const std::filesystem::path& path, const MemoryTimeline& timeline) {
  write_file_atomically(path, timeline_json(timeline).dump() + "\n");
}

MemoryTimeline read_timeline(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path.string() + ": cannot be read");
  try {
    return timeline_from_json(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path.string() + ": not JSON: " + e.what());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path.string() + ": " + e.what());
  }
}

MemoryTimelineRecorder::MemoryTimelineRecorder(Allocator& device, Allocator& host, Executor& executor)
    : device_(device), host_(host), executor_(executor) {
  executor_.observe_marks([this](std::string_view pass, int layer) { mark(pass, layer); });
  device_.set_change_observer([this](const CategoryBytes& live) { changed(true, live); });
  host_.set_change_observer([this](const CategoryBytes& live) { changed(false, live); });
}

MemoryTimelineRecorder::~MemoryTimelineRecorder() {
  executor_.observe_marks({});
  device_.set_change_observer({});
  host_.set_change_observer({});
}

void MemoryTimelineRecorder::begin(std::int64_t step) {
  std::lock_guard lock(mutex_);  // the live bytes are kept current by every change
  timeline_ = MemoryTimeline{step, {{"start", -1}}, {{0, device_live_, host_live_}}};
  recording_ = true;
}

void MemoryTimelineRecorder::mark(std::string_view pass, int layer) {
  std::lock_guard lock(mutex_);
  if (recording_) timeline_.marks.push_back({std::string(pass), layer});
}

MemoryTimeline MemoryTimelineRecorder::end() {
  std::lock_guard lock(mutex_);
  recording_ = false;
  return std::move(timeline_);
}

void MemoryTimelineRecorder::changed(bool device, const CategoryBytes& live) noexcept {
  std::lock_guard lock(mutex_);
  (device ? device_live_ : host_live_) = live;
  if (!recording_) return;
  try {
    timeline_.samples.push_back({static_cast<std::uint32_t>(timeline_.marks.size() - 1), device_live_, host_live_});
  } catch (const std::bad_alloc&) {
    recording_ = false;  // a timeline cut short is still a timeline; the run goes on
  }
}

}  // namespace strata
