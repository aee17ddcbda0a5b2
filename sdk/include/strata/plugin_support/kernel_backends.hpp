#pragma once
// Where a precision plugin with its own kernels runs: the cpu backend always, cuda:N when the
// plugin was built with its CUDA kernels. The refusal names what has no kernels and what to use.
#include <string>
#include <string_view>

#include "strata/kernel.hpp"
#include "strata/status.hpp"

namespace strata::plugin_support {

inline bool on_cuda(const KernelTarget& target) noexcept {
  return target.backend.starts_with("cuda:");
}

// `what`: "int8 weights", "f16 weights".
inline Status cpu_or_cuda(const KernelTarget& target, bool built_with_cuda, std::string_view what) {
  if (target.backend == "cpu" || (built_with_cuda && on_cuda(target))) return {};
  return Status::error(std::string(what) +
                       " have kernels for the cpu backend (and cuda:N in a build with nvcc), not for device.kind = \"" +
                       std::string(target.backend) + "\" in this build (use bf16 there)");
}

}  // namespace strata::plugin_support
