#pragma once
// Where the CUDA backend's two arenas get their bytes: device memory from the stream-ordered pool
// (cudaMallocAsync on the compute stream, kept in the pool rather than returned to the driver), and
// pinned host memory (cudaHostAlloc), which the copy engine reads and writes without staging.
#include <cuda_runtime_api.h>

#include <memory>

#include "core/device/allocator.hpp"

namespace strata {

std::unique_ptr<MemoryResource> make_cuda_device_resource(int device, cudaStream_t stream);
std::unique_ptr<MemoryResource> make_pinned_host_resource();

// Throws std::runtime_error naming `what` when status is not cudaSuccess.
void check_cuda(cudaError_t status, const char* what);

}  // namespace strata
