#pragma once
// A within-step memory timeline: the device's and the host's live bytes per category after every
// allocation and release of one step, with the executor's marks (which pass, which block) in
// between. `strata plan --html` draws the dry run's (the prediction), `strata train
// --memory-timeline FILE` writes a run's, and `strata ab --html` draws the two side by side
// (docs/architecture.md, "The planner").
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "strata/memory_category.hpp"

namespace strata {

class Allocator;
class Executor;

struct MemoryTimeline {
  // A point of the step the executor reached: "forward" / "backward" / "update" of a block (layer
  // -1: the embedding and the head, or the whole model's update), or "head".
  struct Mark {
    std::string pass;
    int layer = -1;
  };
  // The live bytes after one change of either arena, and the mark in force when it happened.
  struct Sample {
    std::uint32_t mark = 0;
    CategoryBytes device{};
    CategoryBytes host{};
  };
  std::int64_t step = 0;
  std::vector<Mark> marks;  // marks[0] is "start": the step's first sample, before any op
  std::vector<Sample> samples;
};

nlohmann::json timeline_json(const MemoryTimeline& timeline);
// Throws std::invalid_argument naming what is wrong with the object.
MemoryTimeline timeline_from_json(const nlohmann::json& json);
void write_timeline(const std::filesystem::path& path, const MemoryTimeline& timeline);  // atomically
// Throws std::invalid_argument naming the file.
MemoryTimeline read_timeline(const std::filesystem::path& path);

// Records one step from two arenas and the executor's marks. Each arena calls it under its own
// lock, possibly from another thread (a copy landing on the copy stream): its own mutex is taken
// inside theirs and never the other way round.
class MemoryTimelineRecorder {
 public:
  MemoryTimelineRecorder(Allocator& device, Allocator& host, Executor& executor);
  ~MemoryTimelineRecorder();  // stops observing the arenas and the executor
  MemoryTimelineRecorder(const MemoryTimelineRecorder&) = delete;
  MemoryTimelineRecorder& operator=(const MemoryTimelineRecorder&) = delete;

  void begin(std::int64_t step);                // the first sample: what is live as the step starts
  void mark(std::string_view pass, int layer);  // the executor's; ignored outside a step
  MemoryTimeline end();                         // the step's timeline; recording stops

 private:
  void changed(bool device, const CategoryBytes& live) noexcept;

  Allocator& device_;
  Allocator& host_;
  Executor& executor_;
  std::mutex mutex_;
  bool recording_ = false;
  CategoryBytes device_live_{};
  CategoryBytes host_live_{};
  MemoryTimeline timeline_;
};

}  // namespace strata
