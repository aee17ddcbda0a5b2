#include <cstring>

#include "core/device/cpu_copy_stream.hpp"
#include "core/device/device.hpp"

namespace strata {

namespace {

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::uint64_t limit)
      : device_("cpu device memory", make_aligned_host_resource(), limit),
        host_("cpu host memory", make_aligned_host_resource()),
        copy_stream_(make_cpu_copy_stream()) {}

  std::string name() const override { return "cpu"; }
  Allocator& device_memory() noexcept override { return device_; }
  Allocator& host_memory() noexcept override { return host_; }
  void copy(void* destination, const void* source, std::uint64_t bytes) override {
    std::memcpy(destination, source, bytes);
  }
  CopyStream& copy_stream() noexcept override { return *copy_stream_; }

 private:
  Allocator device_;
  Allocator host_;
  std::unique_ptr<CopyStream> copy_stream_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(std::uint64_t device_memory_limit) {
  return std::make_unique<CpuDevice>(device_memory_limit);
}

}  // namespace strata
