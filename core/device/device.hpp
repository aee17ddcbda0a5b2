#pragma once
// A compute device and its two arenas: device memory (accounted, optionally limited) and host
// memory (the offload target). On the CPU backend both are host RAM, kept apart so that every
// strategy's effect on "device" bytes is exact; a CUDA device backs the first with cudaMalloc.
#include <cstdint>
#include <memory>
#include <string>

#include "core/device/allocator.hpp"
#include "core/device/copy_stream.hpp"

namespace strata {

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  virtual Allocator& device_memory() noexcept = 0;
  virtual Allocator& host_memory() noexcept = 0;
  // Copies between any two buffers of this device's arenas.
  virtual void copy(void* destination, const void* source, std::uint64_t bytes) = 0;
  // The stream that asynchronous residency moves run on.
  virtual CopyStream& copy_stream() noexcept = 0;
};

std::unique_ptr<Device> make_cpu_device(std::uint64_t device_memory_limit);

}  // namespace strata
