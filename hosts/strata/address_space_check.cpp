// Under an address-space limit (ulimit -v) too small for OpenBLAS's work buffers, OpenBLAS's
// initialiser retries its 128 MiB allocation forever, before main: the process spins at 100% CPU
// and prints nothing. This check runs earlier still, from the executable's preinit_array (the
// loader runs it after mapping the libraries and before any library's initialiser): it reserves,
// and at once releases, the address space OpenBLAS is about to ask for, and on failure says so
// and exits 1. docs/reliability.md describes the limit.
#include <malloc.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "early_environment.hpp"

namespace {

constexpr unsigned long kOpenBlasBufferBytes = 128ul << 20;  // its BUFFER_SIZE on x86-64
constexpr unsigned long kHeadroomBytes = 16ul << 20;         // its other start-up allocations (measured: ~12 MiB)

// The threads OpenBLAS will start: Strata links its OpenMP build, which follows OMP_NUM_THREADS
// (OPENBLAS_NUM_THREADS is ignored there), else one per core it may use.
unsigned long openblas_threads(char** environment) {
  if (const char* text = strata::early_environment_value(environment, "OMP_NUM_THREADS");
      text != nullptr && std::atol(text) > 0)
    return static_cast<unsigned long>(std::atol(text));
  // OpenMP starts one per core this process may run on (its affinity, as a job scheduler sets it).
  cpu_set_t cores;
  if (::sched_getaffinity(0, sizeof cores, &cores) == 0 && CPU_COUNT(&cores) > 0)
    return static_cast<unsigned long>(CPU_COUNT(&cores));
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<unsigned long>(online) : 1ul;
}

// The loader calls preinit functions with main's arguments and environment.
void check_address_space(int, char**, char** environment) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  // Each thread's own malloc arena reserves 64 MiB of address space up front (glibc): under a
  // limit, the threads share one instead, leaving the space to the run.
  ::mallopt(M_ARENA_MAX, 1);
  const unsigned long need =
      openblas_threads(environment) * kOpenBlasBufferBytes + kHeadroomBytes;  // one buffer per thread
  void* reserved = ::mmap(nullptr, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved != MAP_FAILED) {
    ::munmap(reserved, need);
    return;
  }
  char message[512];
  const int length = std::snprintf(
      message, sizeof message,
      "strata: the address-space limit (ulimit -v %lu KiB) leaves too little room for OpenBLAS's work buffers "
      "(%lu MiB for %lu threads), which it would retry forever: raise the limit, or set OMP_NUM_THREADS=1; "
      "to bound a run's memory, use [device] memory_limit\n",
      static_cast<unsigned long>(limit.rlim_cur / 1024), need >> 20, openblas_threads(environment));
  if (length > 0) [[maybe_unused]]
    const auto written = ::write(STDERR_FILENO, message, static_cast<std::size_t>(length));
  ::_exit(1);
}

}  // namespace

// Not mutable state: a constant the loader reads once.
[[gnu::used, gnu::section(".preinit_array")]] const auto kCheckAddressSpaceBeforeLibraries = &check_address_space;
