#pragma once
// The memory a plugin keeps and the copies it makes (strata/plugin_memory.hpp), from the run's
// accounted arenas under the plugin's name: host memory from the backend's host arena, backend
// memory from its device arena. Freed when this object goes, at the end of the run.
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "strata/plugin_memory.hpp"

namespace strata {

class PluginMemoryImpl final : public PluginMemory {
 public:
  PluginMemoryImpl(Backend& backend, std::string owner) : backend_(backend), owner_(std::move(owner)) {}

  std::span<float> host_floats(std::uint64_t count) override;
  TensorView device_floats(std::string_view name, std::uint64_t count, MemoryCategory category) override;
  std::span<std::byte> host_bytes(std::uint64_t bytes) override;
  void copy_to_host(void* host_destination, const TensorView& source) override;
  void copy_from_host(const TensorView& destination, const void* host_source) override;
  void release(const void* data) override;
  TensorView resize(const TensorView& buffer, std::uint64_t count) override;
  std::span<float> resize(std::span<float> buffer, std::uint64_t count) override;

  const std::string& owner() const noexcept { return owner_; }
  // What the arenas count under the owner's name now, and the bytes it copied.
  std::uint64_t host_bytes_live() const;
  std::uint64_t device_bytes_live() const;
  std::uint64_t bytes_to_host() const noexcept { return bytes_to_host_; }
  std::uint64_t bytes_to_device() const noexcept { return bytes_to_device_; }

 private:
  // The buffer holding `data`, or an error naming the owner.
  std::vector<Buffer>::iterator find(const void* data);

  Backend& backend_;
  std::string owner_;
  std::vector<Buffer> buffers_;
  std::uint64_t bytes_to_host_ = 0;
  std::uint64_t bytes_to_device_ = 0;
};

}  // namespace strata
