#pragma once
// The CUDA backend's entry points, compiled only when the build has CUDA (STRATA_HAVE_CUDA).
#include <cstdint>
#include <memory>
#include <string>

#include "core/device/backend.hpp"

namespace strata {

// How many CUDA devices are visible; when none, why_none says why (no driver, no device, ...).
int visible_cuda_devices(std::string& why_none);

// Throws std::runtime_error when the device cannot be set up.
// tf32_products: f32 products run on TF32 tensor cores (see make_backend).
std::unique_ptr<Backend> make_cuda_backend(int device, std::uint64_t device_memory_limit, bool tf32_products);

}  // namespace strata
