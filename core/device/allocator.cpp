#include "core/device/allocator.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/device/memory_limit_exceeded.hpp"

namespace strata {

namespace {

constexpr std::uint64_t kAlignment = 64;

std::uint64_t round_up(std::uint64_t bytes) {
  return (std::max<std::uint64_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
}

class AlignedHostResource final : public MemoryResource {
 public:
  void* allocate(std::uint64_t bytes) override {
    void* pointer = std::aligned_alloc(kAlignment, bytes);
    if (pointer == nullptr) throw std::bad_alloc();
    return pointer;
  }
  void deallocate(void* pointer, std::uint64_t) noexcept override { std::free(pointer); }
};

}  // namespace

std::unique_ptr<MemoryResource> make_aligned_host_resource() {
  return std::make_unique<AlignedHostResource>();
}

Buffer::Buffer(Buffer&& other) noexcept
    : arena_(other.arena_),
      data_(other.data_),
      bytes_(other.bytes_),
      category_(other.category_),
      owner_id_(other.owner_id_) {
  other.arena_ = nullptr;
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    arena_ = other.arena_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    category_ = other.category_;
    owner_id_ = other.owner_id_;
    other.arena_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Buffer::~Buffer() {
  reset();
}

void Buffer::reset() noexcept {
  if (arena_ != nullptr && data_ != nullptr) arena_->release(data_, bytes_, category_, owner_id_);
  arena_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

Allocator::Allocator(std::string name, std::unique_ptr<MemoryResource> resource, std::uint64_t limit_bytes)
    : name_(std::move(name)), resource_(std::move(resource)) {
  stats_.limit = limit_bytes;
}

Allocator::~Allocator() {
  release_cache();
}

int Allocator::owner_id(std::string_view owner) {
  for (std::size_t i = 0; i < owners_.size(); ++i)
    if (owners_[i] == owner) return static_cast<int>(i);
  owners_.emplace_back(owner);
  live_by_owner_.push_back(0);
  return static_cast<int>(owners_.size() - 1);
}

Buffer Allocator::allocate(std::uint64_t bytes, MemoryCategory category, std::string_view owner) {
  const std::uint64_t size = round_up(bytes);
  void* data = nullptr;
  int owner_index = 0;
  {
    std::lock_guard lock(mutex_);
    if (stats_.limit != 0 && live_total_ + size > stats_.limit)
      throw MemoryLimitExceeded(name_, size, category, owner, stats_.limit, stats_.live);
    owner_index = owner_id(owner);
    if (auto cached = cache_.find(size); cached != cache_.end()) {
      data = cached->second;
      cache_.erase(cached);
    } else {
      // Drop cached blocks before growing past the limit: reserved bytes should not exceed it either.
      if (stats_.limit != 0 && stats_.reserved + size > stats_.limit) {
        drop_cache_locked();
      }
      try {
        data = resource_->allocate(size);
      } catch (const std::bad_alloc&) {
        // Blocks cached for other sizes may be what the resource is missing: return them, then try once more.
        drop_cache_locked();
        try {
          data = resource_->allocate(size);
        } catch (const std::bad_alloc&) {
          // The memory itself is full (a GPU without a limit, or a limit above what it has): the
          // same typed error, with what the resource did give standing for the limit.
          throw MemoryLimitExceeded::exhausted(name_, size, category, owner, stats_.reserved, stats_.limit,
                                               stats_.live);
        }
      }
      stats_.reserved += size;
      stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    }
    const std::size_t index = category_index(category);
    stats_.live[index] += size;
    live_total_ += size;
    live_by_owner_[static_cast<std::size_t>(owner_index)] += size;
    stats_.peak[index] = std::max(stats_.peak[index], stats_.live[index]);
    stats_.window_peak[index] = std::max(stats_.window_peak[index], stats_.live[index]);
    if (live_total_ > stats_.peak_total) {
      stats_.peak_total = live_total_;
      if (peak_observer_) peak_observer_(stats_.live);
    }
    stats_.window_peak_total = std::max(stats_.window_peak_total, live_total_);
    if (change_observer_) change_observer_(stats_.live);
  }
  return Buffer(this, data, size, category, owner_index);
}

void Allocator::release(void* data, std::uint64_t bytes, MemoryCategory category, int owner_id) noexcept {
  std::lock_guard lock(mutex_);
  stats_.live[category_index(category)] -= bytes;
  live_total_ -= bytes;
  live_by_owner_[static_cast<std::size_t>(owner_id)] -= bytes;
  cache_.emplace(bytes, data);
  if (change_observer_) change_observer_(stats_.live);
}

ArenaStats Allocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

CategoryBytes Allocator::live() const {
  std::lock_guard lock(mutex_);
  return stats_.live;
}

std::uint64_t Allocator::live_total() const {
  std::lock_guard lock(mutex_);
  return live_total_;
}

std::map<std::string, std::uint64_t> Allocator::live_by_owner() const {
  std::lock_guard lock(mutex_);
  std::map<std::string, std::uint64_t> result;
  for (std::size_t i = 0; i < owners_.size(); ++i) result[owners_[i]] = live_by_owner_[i];
  return result;
}

void Allocator::reset_window() {
  std::lock_guard lock(mutex_);
  stats_.window_peak = stats_.live;
  stats_.window_peak_total = live_total_;
}

void Allocator::set_peak_observer(std::function<void(const CategoryBytes&)> observer) {
  std::lock_guard lock(mutex_);
  peak_observer_ = std::move(observer);
}

void Allocator::set_change_observer(std::function<void(const CategoryBytes&)> observer) {
  std::lock_guard lock(mutex_);
  change_observer_ = std::move(observer);
  if (change_observer_) change_observer_(stats_.live);  // where it starts from
}

void Allocator::release_cache() {
  std::lock_guard lock(mutex_);
  drop_cache_locked();
}

void Allocator::drop_cache_locked() noexcept {
  for (auto& [size, pointer] : cache_) {
    resource_->deallocate(pointer, size);
    stats_.reserved -= size;
  }
  cache_.clear();
}

}  // namespace strata
