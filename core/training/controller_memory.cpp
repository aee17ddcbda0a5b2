#include "core/training/controller_memory.hpp"

#include <cstring>

namespace strata {

std::span<float> ControllerMemory::host_floats(std::uint64_t count) {
  Buffer& buffer =
      buffers_.emplace_back(backend_.host_memory().allocate(count * sizeof(float), MemoryCategory::other, owner_));
  std::memset(buffer.data(), 0, buffer.bytes());
  return {static_cast<float*>(buffer.data()), count};
}

TensorView ControllerMemory::device_floats(std::string_view name, std::uint64_t count) {
  Buffer& buffer =
      buffers_.emplace_back(backend_.device_memory().allocate(count * sizeof(float), MemoryCategory::other, owner_));
  backend_.ops().fill(buffer.data(), 0, buffer.bytes());
  return TensorView{name, -1, buffer.data(), DType::f32, static_cast<std::int64_t>(count), MemorySpace::device};
}

namespace {

std::uint64_t owned_by(const Allocator& arena, const std::string& owner) {
  const auto live = arena.live_by_owner();
  const auto found = live.find(owner);
  return found == live.end() ? 0 : found->second;
}

}  // namespace

std::uint64_t ControllerMemory::host_bytes() const {
  return owned_by(backend_.host_memory(), owner_);
}

std::uint64_t ControllerMemory::device_bytes() const {
  return owned_by(backend_.device_memory(), owner_);
}

}  // namespace strata
