#include "core/device/backends.hpp"

#include <stdexcept>

namespace strata {

std::vector<std::string> available_backends() {
  return {"cpu"};
}

std::unique_ptr<Backend> make_backend(const std::string& kind, std::uint64_t device_memory_limit) {
  if (kind == "cpu") return make_cpu_backend(device_memory_limit);
  throw std::invalid_argument("device kind \"" + kind +
                              "\": this build runs on the CPU backend only (no CUDA backend is built yet)");
}

}  // namespace strata
