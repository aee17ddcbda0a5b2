#pragma once
// A trainable addition to a block matrix's product: plugin-owned parameters and an op override per
// parameter (docs/architecture.md, "What trains" and "Op overrides"). A strategy that adapts
// matrices (LoRA: y = x W + s (x A) B) names them in plan_parameters (ParameterPlan::adapt); the
// host then
//   - adds the adapter's tensors beside each adapted matrix as trainable f32 parameters of its
//     block, named "<matrix>.<tensor>" (h.3.attn.c_attn.lora_A): they get gradient rows, optimizer
//     state, residency moves and checkpoint entries like any other parameter;
//   - asks init() for their first values;
//   - after the matrix's own matmul (whatever its dtype: f32, bf16, int8), calls forward() to add
//     the adapter's part, and after the matrix's backward, backward() to add its input gradient
//     and its own tensors' gradients.
// The adapted matrix itself is usually frozen by the same plan. Pointers are the backend's memory;
// the adapter computes through the op table it is given.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/ops.hpp"
#include "strata/status.hpp"

namespace strata {

// One of the adapter's tensors for a matrix: a name ("lora_A") and a shape.
struct AdapterTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

// The matrix being adapted: its parameter name, the plan's target name ("qkv", "q"), its block, a
// number unique to it in the model (0, 1, ...: seeds and dropout streams), and its matmul shape
// (rows = the model's input rows, batch x seq_len).
struct AdaptedMatrix {
  std::string_view name;
  std::string_view target;
  int layer = 0;
  int index = 0;
  MatmulShape shape;
};

// The adapter's tensors for one matrix, in the order tensors() named them. grads is empty when the
// model does not train (evaluation); a gradient accumulates.
struct AdapterTensors {
  std::span<const float* const> values;
  std::span<float* const> grads;
};

// Which pass runs: a training forward/backward (dropout on, `sequence` unique to the micro batch in
// the run, the same again when checkpointing recomputes it) or an evaluation (dropout off).
struct AdapterPass {
  std::uint64_t sequence = 0;
  bool training = false;
};

class MatmulAdapter {
 public:
  virtual ~MatmulAdapter() = default;
  // Whether it can adapt a matrix of `shape` (rows unused) named by `target`: an error names the
  // key, and the host refuses the manifest with it (exit 2).
  virtual Status check(std::string_view target, const MatmulShape& shape) const = 0;
  // What changes its product besides its tensors' shapes ("lora rank 8 alpha 16"): checkpoints
  // record it, and adapters loaded under another description are refused.
  virtual std::string describe() const = 0;
  // Its tensors for a matrix of `shape` (rows unused).
  virtual std::vector<AdapterTensor> tensors(const MatmulShape& shape) const = 0;
  // The f32 scratch (floats) forward and backward need for a matrix of `shape` (rows = input rows).
  virtual std::int64_t scratch_floats(const MatmulShape& shape) const noexcept = 0;
  // First values, on the host, one span per tensor; `seed` is the run's seed.
  virtual void init(const AdaptedMatrix& matrix, std::span<const std::span<float>> values,
                    std::uint64_t seed) const = 0;
  // out (N, out) += the adapter's product of inp (N, in).
  virtual void forward(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, float* out, const float* inp,
                       AdapterTensors tensors, Scratch scratch) const noexcept = 0;
  // dinp (N, in) += its input gradient; tensors.grads += its tensors' gradients. inp is the forward's.
  virtual void backward(Ops& ops, const AdaptedMatrix& matrix, const AdapterPass& pass, float* dinp, const float* dout,
                        const float* inp, AdapterTensors tensors, Scratch scratch) const noexcept = 0;
  // The matrix with the adapter folded in, on the host: weight (f32, in shape.layout) += the
  // adapter's matrix, so that inp @ weight equals the adapted product (evaluation, no dropout).
  virtual void merge(std::span<float> weight, const MatmulShape& shape,
                     std::span<const std::span<const float>> values) const = 0;
};

}  // namespace strata
