#pragma once
// After a plugin's own kernel launch on the CUDA backend's stream: a launch that failed is logged
// under the plugin's name. The error stays pending (peeked, not taken), so the backend's next op
// reports it and the run fails (exit 1) rather than computing on what the kernel did not write.
#include <cuda_runtime_api.h>

#include <string>

#include "strata/host_services.hpp"

namespace strata::plugin_support {

inline void log_failed_launch(HostServices& host, const std::string& what) noexcept {
  if (const cudaError_t error = cudaPeekAtLastError(); error != cudaSuccess)
    host.log(LogLevel::error, what + " did not launch: " + cudaGetErrorString(error));
}

}  // namespace strata::plugin_support
