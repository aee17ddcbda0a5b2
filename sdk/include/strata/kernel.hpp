#pragma once
// A replaceable compute kernel (an op override per op: docs/architecture.md, "Op overrides").
// Manifests pick one per op: `[kernels] attention = "flash"`, or a table with the kernel's own keys:
// `[kernels.attention] plugin = "flash", ...` (the factory reads them from its ConfigView as any
// plugin does). Attention is the op plugins replace today; a kernel declares how many floats it
// saves for backward, so its memory shows up in the activation rows of the tensor table. The shapes
// and operands are the op table's (strata/op_records.hpp); pointers are the memory of the backend the
// kernel is bound to. Each call says where it is (KernelCall): the block, the step, the micro batch
// and the pass, so a kernel that draws random numbers seeds them from the call, not from its data.
//
// A kernel may run on several backends. The host asks check() at validate time (the target names
// the manifest's device.kind, no stream yet) and again once the backend exists, then bind()s the
// kernel to that backend's compute stream before the first call; every call is issued on it.
#include <cstdint>
#include <string_view>

#include "strata/ops.hpp"
#include "strata/status.hpp"

namespace strata {

// Where a kernel runs.
struct KernelTarget {
  std::string_view backend;  // "cpu", "cuda:0": the manifest's device.kind
  int device_index = -1;     // the CUDA device ordinal; -1 on the CPU and at validate time
  void* stream = nullptr;    // the compute stream (a cudaStream_t on CUDA); null on the CPU and at validate time
};

// Which pass a kernel call belongs to: a training forward or backward, a forward run again to
// recompute dropped activations (it must give the first forward's bits), an evaluation, or decoding.
enum class KernelPass : std::uint8_t { training, recompute, evaluation, decoding };

struct KernelCall {
  int layer = -1;         // the block
  std::int64_t step = 0;  // 1-based training step; 0 outside training
  int micro_batch = 0;    // within the step
  KernelPass pass = KernelPass::training;
  std::uint64_t sequence = 0;  // unique to the micro batch in the run, the same on recompute and resume
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string_view op() const noexcept = 0;  // "attention"
  // Whether this kernel runs `shape` on `target`; an error says what it cannot do and what it
  // supports ("head dim 96: ... supports head dims 64 and 128"; a sliding window or packed documents
  // it does not implement). The host refuses the manifest with the message (exit 2), or, before a
  // run starts, reports it.
  virtual Status check(const AttentionShape& shape, const KernelTarget& target) const = 0;
  // Binds the kernel to the backend the run uses. Called once, after check() passed on `target`.
  virtual Status bind(const KernelTarget& /*target*/) { return {}; }

  // Floats kept between forward and backward (an activation), and scratch needed by backward.
  virtual std::int64_t saved_floats(const AttentionShape& shape) const noexcept = 0;
  virtual std::int64_t backward_scratch_floats(const AttentionShape& shape) const noexcept = 0;

  // Causal; out is (N, n_head * head_dim). Both may throw: the host reports the exception with
  // the plugin's name and the layer, as it does an error Status. The forward pass must be
  // deterministic: selective checkpointing runs it again and writes `out` over the kept output.
  virtual Status attention_forward(const KernelCall& call, const AttentionShape& shape, float* out, float* saved,
                                   const AttentionInputs& in) = 0;
  // Adds into the gradients. `out` is the forward's output, which the model keeps (under bf16
  // activation storage, rounded to bf16 and widened back).
  virtual Status attention_backward(const KernelCall& call, const AttentionShape& shape, const AttentionGrads& grads,
                                    const float* dout, const float* out, const AttentionInputs& in, const float* saved,
                                    float* scratch) = 0;
};

}  // namespace strata
