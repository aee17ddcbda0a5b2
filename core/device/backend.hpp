#pragma once
// A backend (docs/architecture.md, "Backends and the op table" and "Memory accounting"): its op
// table, its two arenas — device memory (accounted, optionally limited) and host memory (the
// offload target) — and its streams. Ops run in order on the compute stream; residency moves run on
// the copy stream, whose tickets are the events compute waits on. On the CPU backend both arenas
// are host RAM, kept apart so that every strategy's effect on "device" bytes is exact, and compute
// is synchronous; a CUDA backend backs the first arena with cudaMallocAsync and the second with
// pinned memory.
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "core/device/allocator.hpp"
#include "core/device/copy_stream.hpp"
#include "strata/kernel.hpp"
#include "strata/ops.hpp"

namespace strata {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  // Where a kernel plugin bound to this backend runs: its name, device and compute stream.
  virtual KernelTarget kernel_target() const noexcept = 0;
  virtual Ops& ops() noexcept = 0;
  // The op table for rows that all live in host memory (offloaded optimizer state, its gradients
  // and masters): it runs on the host, at once, with this backend's bits, so an update of offloaded
  // rows works on the host's cores instead of across the bus (ZeRO-Offload's CPU update). The
  // caller has completed the rows' moves, and no queued device work touches them. On the CPU
  // backend, whose arenas are both host RAM, it is ops().
  virtual Ops& host_ops() noexcept { return ops(); }
  virtual Allocator& device_memory() noexcept = 0;
  virtual Allocator& host_memory() noexcept = 0;
  // The stream that asynchronous residency moves run on.
  virtual CopyStream& copy_stream() noexcept = 0;
  // Waits until every op issued on the compute stream has finished, and throws the first failure of
  // an op since the last call (ops are noexcept; a GPU reports its errors here).
  virtual void synchronize() = 0;
  // Waits for the compute stream and nothing else: a failure stays for synchronize() to throw
  // (the profiler's fence).
  virtual void wait_for_compute() noexcept {}
  // What the driver reports for the whole device, to cross-check the arena's accounting: the
  // arena's reserved bytes plus the context, cuBLAS and kernel images should explain "used".
  // Empty on the CPU, where nothing but the arena exists.
  struct DriverMemory {
    std::uint64_t used = 0;  // total - free, every process on the device included
    std::uint64_t total = 0;
  };
  virtual std::optional<DriverMemory> driver_memory() const { return std::nullopt; }
  // Zeroes host-arena memory (host memory: the host writes it). The planner's dry backend, whose
  // values do not matter, leaves it as it is rather than touch every page of a large plan.
  virtual void zero_host_memory(void* data, std::uint64_t bytes) noexcept { std::memset(data, 0, bytes); }
};

std::unique_ptr<Backend> make_cpu_backend(std::uint64_t device_memory_limit);

}  // namespace strata
