// OpenMP's threads wait for work by spinning: libgomp's default is 300000 turns before they sleep.
// On a machine with other work (a second job, a build) the spinning threads take the cores the
// working ones need: beside one busy process per core, GPT-2 124M's step took 5.2x as long as on
// the idle machine, the quickstart's 34x. Sleeping at once (OMP_WAIT_POLICY=passive) fixes that
// but costs an idle machine dearly wherever parallel regions are short, since every region then
// starts with a wake-up: the quickstart's step 1.43x, decoding 12x slower. A short spin keeps
// most of both: 10000 turns cover the gaps between a step's regions on an idle machine and yield
// the cores soon enough under load (2.9x and 9x; docs/benchmarks.md, "OpenMP's waiting threads").
// libgomp reads its settings once, in its initialiser, before main; this runs earlier still, from
// the executable's preinit_array, and starts the program again with GOMP_SPINCOUNT=10000 added to
// its environment. exec keeps the process id and no library has initialised yet, so the cost is
// the loader's work a second time (6 ms a start: bench/openmp_wait_bench.sh startup). A user's own
// setting (OMP_WAIT_POLICY, or GOMP_SPINCOUNT) is left alone; child processes (strata ab's runs,
// the ranks mpirun starts) inherit the environment.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>

#include "early_environment.hpp"

namespace {

constexpr const char kShortSpin[] = "GOMP_SPINCOUNT=10000";

// The loader calls preinit functions with main's arguments and environment.
void default_to_a_short_spin(int, char** arguments, char** environment) {
  if (strata::early_environment_value(environment, "OMP_WAIT_POLICY") != nullptr ||
      strata::early_environment_value(environment, "GOMP_SPINCOUNT") != nullptr)
    return;
  std::size_t count = 0;
  while (environment != nullptr && environment[count] != nullptr) ++count;
  // No allocator is safe to call yet: the new block comes from the kernel, and exec releases it.
  const std::size_t bytes = (count + 2) * sizeof(char*);
  void* block = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) return;  // carry on with libgomp's default
  char** extended = static_cast<char**>(block);
  for (std::size_t i = 0; i < count; ++i) extended[i] = environment[i];
  extended[count] = const_cast<char*>(kShortSpin);  // execve copies, never writes
  extended[count + 1] = nullptr;
  ::execve("/proc/self/exe", arguments, extended);
  ::munmap(block, bytes);  // exec failed (no /proc): carry on with libgomp's default
}

}  // namespace

// Not mutable state: a constant the loader reads once.
[[gnu::used, gnu::section(".preinit_array")]] const auto kDefaultToAShortSpin = &default_to_a_short_spin;
