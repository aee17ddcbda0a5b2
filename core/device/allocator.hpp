#pragma once
// An accounted memory arena. Every allocation is tagged with a category and an owner ("core" or a
// plugin's name); the arena keeps live and peak bytes per category, per owner, and a resettable
// "window" peak so telemetry can report the peak within each step. An optional hard limit on live
// bytes turns an over-budget request into MemoryLimitExceeded, never a crash.
//
// Freed blocks are cached by exact size and reused (like a GPU caching allocator), so per-step
// activation buffers cost no system calls; cached bytes are reported as reserved, not live.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "strata/memory_category.hpp"

namespace strata {

// Where an arena's bytes come from: aligned host memory, pinned memory, cudaMalloc.
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  virtual void* allocate(std::uint64_t bytes) = 0;  // throws std::bad_alloc
  virtual void deallocate(void* pointer, std::uint64_t bytes) noexcept = 0;
};

std::unique_ptr<MemoryResource> make_aligned_host_resource();

class Allocator;

// An owned block of an arena's memory; returning it to the arena is the destructor's job.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() const noexcept { return data_; }
  std::uint64_t bytes() const noexcept { return bytes_; }
  MemoryCategory category() const noexcept { return category_; }
  const Allocator* arena() const noexcept { return arena_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }
  void reset() noexcept;

 private:
  friend class Allocator;
  Buffer(Allocator* arena, void* data, std::uint64_t bytes, MemoryCategory category, int owner_id)
      : arena_(arena), data_(data), bytes_(bytes), category_(category), owner_id_(owner_id) {}

  Allocator* arena_ = nullptr;
  void* data_ = nullptr;
  std::uint64_t bytes_ = 0;
  MemoryCategory category_ = MemoryCategory::other;
  int owner_id_ = 0;
};

struct ArenaStats {
  CategoryBytes live{};
  CategoryBytes peak{};          // since creation
  std::uint64_t peak_total = 0;  // peak of the sum, since creation
  CategoryBytes window_peak{};   // since the last reset_window()
  std::uint64_t window_peak_total = 0;
  std::uint64_t reserved = 0;       // live + cached
  std::uint64_t peak_reserved = 0;  // since creation: the most held from the resource at once
  std::uint64_t limit = 0;          // 0: none
};

class Allocator {
 public:
  Allocator(std::string name, std::unique_ptr<MemoryResource> resource, std::uint64_t limit_bytes = 0);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Memory is uninitialized: the arena may be device memory, which only the backend's ops may
  // write (Residency zeroes rows through the fill op). Throws MemoryLimitExceeded over the limit.
  Buffer allocate(std::uint64_t bytes, MemoryCategory category, std::string_view owner = "core");

  const std::string& name() const noexcept { return name_; }
  std::uint64_t limit() const noexcept { return stats_.limit; }  // fixed at construction
  ArenaStats stats() const;
  CategoryBytes live() const;
  std::uint64_t live_total() const;
  std::map<std::string, std::uint64_t> live_by_owner() const;
  void reset_window();
  void release_cache();
  // Called, with the arena's lock held, each time the total live bytes reach a new peak, with the
  // live bytes per category: the planner (core/planner/) notes what the peak held and which op it
  // came before. It must not use this arena.
  void set_peak_observer(std::function<void(const CategoryBytes& live)> observer);
  // Called, with the arena's lock held, after every allocation and release, with the live bytes
  // per category, and once as it is set, with what is live then: a memory timeline
  // (core/training/memory_timeline.hpp) records one step with it. It must not use this arena, and
  // must not throw.
  void set_change_observer(std::function<void(const CategoryBytes& live)> observer);

 private:
  friend class Buffer;
  void release(void* data, std::uint64_t bytes, MemoryCategory category, int owner_id) noexcept;
  int owner_id(std::string_view owner);
  void drop_cache_locked() noexcept;  // returns every cached block to the resource; mutex_ held

  std::string name_;
  std::unique_ptr<MemoryResource> resource_;
  mutable std::mutex mutex_;
  ArenaStats stats_;
  std::uint64_t live_total_ = 0;
  std::vector<std::string> owners_;
  std::vector<std::uint64_t> live_by_owner_;
  std::multimap<std::uint64_t, void*> cache_;  // size -> free block
  std::function<void(const CategoryBytes&)> peak_observer_;
  std::function<void(const CategoryBytes&)> change_observer_;
};

}  // namespace strata
