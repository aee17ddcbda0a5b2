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
#include "counting_ops.hpp"

namespace strata::test {

// How its matmuls with a bf16 weight treat an f32 input.
enum class SealedProducts {
  cpu,      // as the CPU backend's: f32 products on the f32 input; no bf16-input matmuls
  rounded,  // as a GPU's: the input rounded to bf16 first; no bf16-input matmuls
  // Rounded, and the bf16-input matmuls (SDK 9.9) offered, as a GPU offers them: a run takes the
  // model's bf16-input path, and must give `rounded`'s losses bit for bit.
  bf16_inputs,
};

// The bf16-input matmuls a sealed backend served, by weight layout (index: WeightLayout; GPT-2's
// blocks are in_out, every LM head out_in).
struct Bf16InputCalls {
  int forward[2] = {0, 0};
  int backward[2] = {0, 0};
};

// `calls`, where given, counts the bf16-input matmuls, and `host_calls` the ops its host op table
// (Backend::host_ops) served (each must outlive the backend). That table opens no device mapping,
// so a device row handed to it crashes the test.
std::unique_ptr<Backend> make_sealed_cpu_backend(std::uint64_t device_memory_limit,
                                                 SealedProducts products = SealedProducts::cpu,
                                                 Bf16InputCalls* calls = nullptr, HostOpCalls* host_calls = nullptr);

}  // namespace strata::test
