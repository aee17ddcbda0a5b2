#include "core/device/cuda/cuda_memory.hpp"

#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

namespace strata {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

namespace {

class CudaDeviceResource final : public MemoryResource {
 public:
  CudaDeviceResource(int device, cudaStream_t stream) : device_(device), stream_(stream) {
    // The arena caches freed blocks itself; the pool keeps what it gets back instead of returning
    // it to the driver at every synchronisation, so allocations stay cheap.
    cudaMemPool_t pool = nullptr;
    check_cuda(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    check_cuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  }
  void* allocate(std::uint64_t bytes) override {
    void* pointer = nullptr;
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");  // another backend's device may be current
    if (cudaMallocAsync(&pointer, bytes, stream_) != cudaSuccess) {
      (void)cudaGetLastError();  // an out-of-memory error is not sticky; clear it for the next call
      throw std::bad_alloc();
    }
    return pointer;
  }
  void deallocate(void* pointer, std::uint64_t) noexcept override {
    (void)cudaSetDevice(device_);
    (void)cudaFreeAsync(pointer, stream_);
  }

 private:
  int device_;
  cudaStream_t stream_;
};

class PinnedHostResource final : public MemoryResource {
 public:
  void* allocate(std::uint64_t bytes) override {
    void* pointer = nullptr;
    if (cudaHostAlloc(&pointer, bytes, cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::bad_alloc();
    }
    return pointer;
  }
  void deallocate(void* pointer, std::uint64_t) noexcept override { (void)cudaFreeHost(pointer); }
};

}  // namespace

std::unique_ptr<MemoryResource> make_cuda_device_resource(int device, cudaStream_t stream) {
  return std::make_unique<CudaDeviceResource>(device, stream);
}

std::unique_ptr<MemoryResource> make_pinned_host_resource() {
  return std::make_unique<PinnedHostResource>();
}

}  // namespace strata
