#pragma once
// Memory and copies a plugin makes through the host, so that they are accounted under the plugin's
// name (the arenas' per-owner bytes, the run summary, `strata ab`) instead of hiding in malloc.
// Buffers stay allocated until the plugin releases them or the run ends; a plugin whose scratch
// changes size (a larger block under the fused update) resizes it rather than asking for more.
// HostServices::memory() hands one out from the first hook on; a phase controller also receives
// one in attach().
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/memory_category.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

class PluginMemory {
 public:
  virtual ~PluginMemory() = default;
  // Host memory the plugin reads and writes itself (zeroed). Throws MemoryLimitExceeded or
  // std::bad_alloc.
  virtual std::span<float> host_floats(std::uint64_t count) = 0;
  // Backend memory for ops (a device buffer on an accelerator; zeroed), counted in `category`
  // (an optimizer's scratch: MemoryCategory::optimizer).
  virtual TensorView device_floats(std::string_view name, std::uint64_t count,
                                   MemoryCategory category = MemoryCategory::other) = 0;
  // Host bytes of any use (zeroed).
  virtual std::span<std::byte> host_bytes(std::uint64_t bytes) = 0;
  // Copies between backend memory and host memory the plugin holds; they wait until done and are
  // counted with the run's transfers.
  virtual void copy_to_host(void* host_destination, const TensorView& source) = 0;
  virtual void copy_from_host(const TensorView& destination, const void* host_source) = 0;
  // Frees a buffer this object handed out (its data pointer: host_floats' or host_bytes' span data,
  // device_floats' view data): its bytes leave the plugin's account at once. Throws
  // std::invalid_argument for memory it did not hand out (or already freed).
  virtual void release(const void* data) = 0;
  // A buffer of `count` elements in place of `buffer`, which is freed: the first min(old, new)
  // elements kept, the rest zeroed. The same for backend memory (its view) and host floats.
  virtual TensorView resize(const TensorView& buffer, std::uint64_t count) = 0;
  virtual std::span<float> resize(std::span<float> buffer, std::uint64_t count) = 0;
};

}  // namespace strata
