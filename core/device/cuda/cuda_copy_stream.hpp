#pragma once
// The CUDA backend's copy stream: residency moves run on their own CUDA stream, so the prefetch of
// layer i+1 overlaps the compute of layer i. Each copy first waits (on the device) for the compute
// issued before it, since an eviction copies what that compute wrote; waiting for a ticket blocks
// the host on the copy's event, after which the compute the host issues next sees its bytes.
#include <cuda_runtime_api.h>

#include <memory>

#include "core/device/copy_stream.hpp"

namespace strata {

std::unique_ptr<CopyStream> make_cuda_copy_stream(cudaStream_t compute_stream);

}  // namespace strata
