#pragma once
// The backends this build can run on: "cpu" always; "cuda:N" once kernels/cuda joins and a device
// is visible. The conformance test (tests/test_backend_ops.cpp) runs its table on each.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"

namespace strata {

std::vector<std::string> available_backends();

// Throws std::invalid_argument naming the kind when this build cannot run it.
std::unique_ptr<Backend> make_backend(const std::string& kind, std::uint64_t device_memory_limit);

}  // namespace strata
