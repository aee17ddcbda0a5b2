#include "core/plugin/plugin_memory_impl.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace strata {

std::span<float> PluginMemoryImpl::host_floats(std::uint64_t count) {
  const std::span<std::byte> bytes = host_bytes(count * sizeof(float));
  return {reinterpret_cast<float*>(bytes.data()), count};
}

std::span<std::byte> PluginMemoryImpl::host_bytes(std::uint64_t bytes) {
  Buffer& buffer = buffers_.emplace_back(backend_.host_memory().allocate(bytes, MemoryCategory::other, owner_));
  std::memset(buffer.data(), 0, buffer.bytes());
  return {static_cast<std::byte*>(buffer.data()), bytes};
}

TensorView PluginMemoryImpl::device_floats(std::string_view name, std::uint64_t count, MemoryCategory category) {
  Buffer& buffer = buffers_.emplace_back(backend_.device_memory().allocate(count * sizeof(float), category, owner_));
  backend_.ops().fill(buffer.data(), 0, buffer.bytes());
  return TensorView{name, -1, buffer.data(), DType::f32, static_cast<std::int64_t>(count), MemorySpace::device};
}

void PluginMemoryImpl::copy_to_host(void* host_destination, const TensorView& source) {
  if (source.space != MemorySpace::device)
    throw std::invalid_argument(std::string(source.name) + " is not backend memory");
  backend_.ops().copy_to_host(host_destination, source.data, source.bytes());
  bytes_to_host_ += source.bytes();
}

void PluginMemoryImpl::copy_from_host(const TensorView& destination, const void* host_source) {
  if (destination.space != MemorySpace::device)
    throw std::invalid_argument(std::string(destination.name) + " is not backend memory");
  backend_.ops().copy_from_host(destination.data, host_source, destination.bytes());
  bytes_to_device_ += destination.bytes();
}

std::vector<Buffer>::iterator PluginMemoryImpl::find(const void* data) {
  const auto found =
      std::find_if(buffers_.begin(), buffers_.end(), [&](const Buffer& buffer) { return buffer.data() == data; });
  if (data == nullptr || found == buffers_.end())
    throw std::invalid_argument("plugin '" + owner_ + "' released memory the host did not hand it (or freed before)");
  return found;
}

void PluginMemoryImpl::release(const void* data) {
  buffers_.erase(find(data));
}

TensorView PluginMemoryImpl::resize(const TensorView& buffer, std::uint64_t count) {
  if (buffer.space != MemorySpace::device || buffer.dtype != DType::f32)
    throw std::invalid_argument("plugin '" + owner_ + "' resized " + std::string(buffer.name) +
                                ", which is not a buffer of device_floats");
  const MemoryCategory category = find(buffer.data)->category();
  const TensorView grown = device_floats(buffer.name, count, category);
  const std::uint64_t kept = std::min<std::uint64_t>(count, static_cast<std::uint64_t>(buffer.count));
  backend_.ops().copy(grown.data, buffer.data, kept * sizeof(float));
  release(buffer.data);
  return grown;
}

std::span<float> PluginMemoryImpl::resize(std::span<float> buffer, std::uint64_t count) {
  (void)find(buffer.data());
  const std::span<float> grown = host_floats(count);
  std::copy_n(buffer.begin(), std::min<std::uint64_t>(count, buffer.size()), grown.begin());
  release(buffer.data());
  return grown;
}

namespace {

std::uint64_t owned_by(const Allocator& arena, const std::string& owner) {
  const auto live = arena.live_by_owner();
  const auto found = live.find(owner);
  return found == live.end() ? 0 : found->second;
}

}  // namespace

std::uint64_t PluginMemoryImpl::host_bytes_live() const {
  return owned_by(backend_.host_memory(), owner_);
}

std::uint64_t PluginMemoryImpl::device_bytes_live() const {
  return owned_by(backend_.device_memory(), owner_);
}

}  // namespace strata
