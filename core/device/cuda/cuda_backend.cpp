// The CUDA backend (docs/architecture.md, "The CUDA backend"): the op table of kernels/cuda on one
// compute stream, device memory from the stream-ordered pool behind the same accounted arena as the
// CPU's (categories, owners, the hard limit), pinned host memory for offload, and a copy stream
// with events.
#include <array>
#include <memory>
#include <string>

#include "core/device/backend.hpp"
#include "core/device/cuda/cuda_backend.hpp"
#include "core/device/cuda/cuda_copy_stream.hpp"
#include "core/device/cuda/cuda_memory.hpp"
#include "kernels/cpu/cuda_order_ops.hpp"
#include "kernels/cuda/cuda_ops.hpp"

namespace strata {

namespace {

class ComputeStream {
 public:
  ComputeStream() { check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~ComputeStream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  ComputeStream(const ComputeStream&) = delete;
  ComputeStream& operator=(const ComputeStream&) = delete;
  cudaStream_t get() const noexcept { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// The ops' own workspaces, one growable block per slot, from the accounted device arena.
class ArenaWorkspace final : public cuda::WorkspaceSource {
 public:
  explicit ArenaWorkspace(Allocator& arena) : arena_(arena) {}
  void* reserve(cuda::WorkspaceSlot slot, std::size_t bytes) override {
    Buffer& block = blocks_[static_cast<std::size_t>(slot)];
    if (block.bytes() < bytes) {
      block.reset();  // stream order keeps in-flight ops on the old block safe (see CudaBackend)
      block = arena_.allocate(bytes, MemoryCategory::workspace, "cuda ops");
    }
    return block.data();
  }

 private:
  Allocator& arena_;
  std::array<Buffer, static_cast<std::size_t>(cuda::WorkspaceSlot::count)> blocks_;
};

int select_device(int device) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

// Members are destroyed in reverse order: the ops and their workspace blocks go before the arenas,
// the arenas (which free into the pool on the compute stream) before the streams. Every queued op
// runs on the one compute stream, so a block freed and handed out again is only touched after the
// ops queued before it.
class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, std::uint64_t limit, bool tf32_products)
      : device_(select_device(device)),
        name_("cuda:" + std::to_string(device)),
        device_memory_(name_ + " device memory", make_cuda_device_resource(device_, compute_.get()), limit),
        host_memory_(name_ + " pinned host memory", make_pinned_host_resource()),
        copy_stream_(make_cuda_copy_stream(compute_.get())),
        workspace_(device_memory_),
        ops_(cuda::make_cuda_ops(name_, compute_.get(), workspace_, tf32_products)),
        host_ops_(cpu::make_cpu_ops_in_cuda_order()) {}

  ~CudaBackend() override { cudaStreamSynchronize(compute_.get()); }

  std::string name() const override { return name_; }
  KernelTarget kernel_target() const noexcept override { return {name_, device_, compute_.get()}; }
  Ops& ops() noexcept override { return *ops_; }
  Ops& host_ops() noexcept override { return *host_ops_; }
  Allocator& device_memory() noexcept override { return device_memory_; }
  Allocator& host_memory() noexcept override { return host_memory_; }
  CopyStream& copy_stream() noexcept override { return *copy_stream_; }

  void synchronize() override {
    select_device(device_);
    const cudaError_t status = cudaStreamSynchronize(compute_.get());
    if (std::exception_ptr error = ops_->take_error()) std::rethrow_exception(error);
    check_cuda(status, (name_ + " compute stream").c_str());
  }

  void wait_for_compute() noexcept override {
    if (cudaSetDevice(device_) == cudaSuccess) (void)cudaStreamSynchronize(compute_.get());
  }

  std::optional<DriverMemory> driver_memory() const override {
    std::size_t free = 0, total = 0;
    if (cudaSetDevice(device_) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError();  // not an op's failure: the next op must not report it
      return std::nullopt;
    }
    return DriverMemory{total - free, total};
  }

 private:
  int device_;
  std::string name_;
  ComputeStream compute_;
  Allocator device_memory_;
  Allocator host_memory_;
  std::unique_ptr<CopyStream> copy_stream_;
  ArenaWorkspace workspace_;
  std::unique_ptr<cuda::CudaOps> ops_;
  std::unique_ptr<Ops> host_ops_;  // the CPU kernels, summing in this backend's order
};

}  // namespace

int visible_cuda_devices(std::string& why_none) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    why_none = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    return 0;
  }
  if (count == 0) why_none = "the driver lists no device";
  return count;
}

std::unique_ptr<Backend> make_cuda_backend(int device, std::uint64_t device_memory_limit, bool tf32_products) {
  return std::make_unique<CudaBackend>(device, device_memory_limit, tf32_products);
}

}  // namespace strata
