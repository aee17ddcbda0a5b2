#include <memory>

#include "core/device/backend.hpp"
#include "core/device/cpu_copy_stream.hpp"
#include "kernels/cpu/cpu_ops.hpp"

namespace strata {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(std::uint64_t limit)
      : ops_(cpu::make_cpu_ops()),
        device_("cpu device memory", make_aligned_host_resource(), limit),
        host_("cpu host memory", make_aligned_host_resource()),
        copy_stream_(make_cpu_copy_stream()) {}

  std::string name() const override { return "cpu"; }
  KernelTarget kernel_target() const noexcept override { return {"cpu", -1, nullptr}; }
  Ops& ops() noexcept override { return *ops_; }
  Allocator& device_memory() noexcept override { return device_; }
  Allocator& host_memory() noexcept override { return host_; }
  CopyStream& copy_stream() noexcept override { return *copy_stream_; }
  void synchronize() override {}  // CPU ops have finished when they return

 private:
  std::unique_ptr<Ops> ops_;
  Allocator device_;
  Allocator host_;
  std::unique_ptr<CopyStream> copy_stream_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::uint64_t device_memory_limit) {
  return std::make_unique<CpuBackend>(device_memory_limit);
}

}  // namespace strata
