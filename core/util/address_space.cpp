#include "core/util/address_space.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

namespace strata {

std::string address_space_shortfall(std::uint64_t bytes) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return {};
  // Reserved and released at once: address space only, no memory.
  void* reserved = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved != MAP_FAILED) {
    ::munmap(reserved, bytes);
    return {};
  }
  return "the address-space limit (ulimit -v " + std::to_string(limit.rlim_cur >> 10) + " KiB) leaves less than the " +
         std::to_string(bytes >> 20) +
         " MiB OpenBLAS's per-thread work buffers may need once the run's memory is allocated, and OpenBLAS would "
         "retry forever: raise the limit or lower train.threads; bound a run's memory with [device] memory_limit";
}

}  // namespace strata
