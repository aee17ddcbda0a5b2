#pragma once
// A test-only CPU backend whose device memory the host cannot touch, so code that dereferences
// device memory (which only ops and copies may reach: docs/architecture.md, "Backends and the op
// table") crashes on the CPU as it would misbehave on a GPU. Every device allocation is its own
// mmap, kept PROT_NONE except while an op of the op table or a copy-stream copy runs; the host
// arena stays ordinary memory. Not a manifest kind: tests pass it to run_training / run_eval
// through their backend seam.
#include <cstdint>
#include <memory>

#include "core/device/backend.hpp"

namespace strata::test {

std::unique_ptr<Backend> make_sealed_cpu_backend(std::uint64_t device_memory_limit);

}  // namespace strata::test
