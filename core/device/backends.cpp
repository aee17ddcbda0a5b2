#include "core/device/backends.hpp"

#include <charconv>
#include <stdexcept>

#ifdef STRATA_HAVE_CUDA
#include "core/device/cuda/cuda_backend.hpp"
#endif

namespace strata {

int cuda_ordinal(const std::string& kind) {
  constexpr std::string_view prefix = "cuda:";
  if (kind.rfind(prefix, 0) != 0 || kind.size() == prefix.size()) return -1;
  int ordinal = -1;
  const char* first = kind.data() + prefix.size();
  const char* last = kind.data() + kind.size();
  const auto [end, error] = std::from_chars(first, last, ordinal);
  return error == std::errc() && end == last && ordinal >= 0 ? ordinal : -1;
}

namespace {

int visible_devices(std::string& why_none) {
#ifdef STRATA_HAVE_CUDA
  return visible_cuda_devices(why_none);
#else
  why_none = "this build has no CUDA backend";
  return 0;
#endif
}

}  // namespace

bool cuda_backend_built() {
#ifdef STRATA_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<std::string> available_backends() {
  std::vector<std::string> kinds{"cpu"};
  std::string why_none;
  const int devices = visible_devices(why_none);
  for (int device = 0; device < devices; ++device) kinds.push_back("cuda:" + std::to_string(device));
  return kinds;
}

std::string backend_unavailable_reason(const std::string& kind) {
  if (kind == "cpu") return {};
  const int ordinal = cuda_ordinal(kind);
  if (ordinal < 0) return "no such backend (\"cpu\" or \"cuda:N\")";
  if (!cuda_backend_built()) return "this build has no CUDA backend (configure with nvcc present, or -DSTRATA_CUDA=ON)";
  std::string why_none;
  const int devices = visible_devices(why_none);
  if (devices == 0) return "no CUDA device visible (" + why_none + ")";
  if (ordinal >= devices)
    return "no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(devices) + " visible: cuda:0" +
           (devices > 1 ? " to cuda:" + std::to_string(devices - 1) : std::string()) + ")";
  return {};
}

std::unique_ptr<Backend> make_backend(const std::string& kind, std::uint64_t device_memory_limit,
                                      [[maybe_unused]] bool tf32_products) {
  if (const std::string why = backend_unavailable_reason(kind); !why.empty())
    throw std::invalid_argument("device kind \"" + kind + "\": " + why);
  if (kind == "cpu") return make_cpu_backend(device_memory_limit);
#ifdef STRATA_HAVE_CUDA
  return make_cuda_backend(cuda_ordinal(kind), device_memory_limit, tf32_products);
#else
  throw std::invalid_argument("device kind \"" + kind + "\": this build has no CUDA backend");
#endif
}

}  // namespace strata
