#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "strata/dtype.hpp"
#include "strata/ops.hpp"
#include "strata/phase.hpp"
#include "strata/status.hpp"
#include "strata/tensor_view.hpp"
#include "strata/weight_quantizer.hpp"

namespace strata {

struct PrecisionDecision {
  bool skip_step = false;  // gradients were not finite: do not apply this update
  double loss_scale = 1.0;
};

// How the model stores numbers and how its gradients are checked. The built-in kernels compute in
// f32 whatever the storage (a bf16 tensor is widened where a kernel reads it); a matrix stored in a
// policy's own dtype is multiplied by the policy's WeightQuantizer, which may round its operands
// (fp16: f16 operands, f32 accumulation) and then asks for a loss scale.
// What a bf16 rounding is for: one tensor's values after the update of `step` (0: the initial or
// loaded values; on a resume, the step the checkpoint holds), in a model that trains, or weights
// for a model that only evaluates (no master copy), which a stochastic rounding should round to
// nearest.
struct RoundingCall {
  std::string_view tensor;  // "h.3.attn.c_attn.weight"
  std::int64_t step = 0;
  bool training = true;
};

// Rounding f32 values into bf16 storage, for a policy that brings its own (stochastic rounding:
// Gupta et al. 2015); the host rounds to nearest even otherwise. `values` and `out` are the
// backend's memory: the policy brings kernels for the backends it accepts, as a WeightQuantizer
// does, and refuses others in its constructor (host.target()). The result must depend only on the
// call and the values, so a resumed or repeated run rounds the same way.
class Bf16Rounding {
 public:
  virtual ~Bf16Rounding() = default;
  virtual void round(std::uint16_t* out, const float* values, std::int64_t count,
                     const RoundingCall& call) noexcept = 0;
};

class PrecisionPolicy {
 public:
  virtual ~PrecisionPolicy() = default;
  // Storage of the blocks' weight matrices. With bf16 or a quantized dtype, the optimizer updates an
  // f32 master copy and the model reads its rounding (bf16) or its quantized form.
  virtual DType weight_storage() const noexcept = 0;
  // Storage of the embedding tables (f32 or bf16: the lookup reads whole rows).
  virtual DType embedding_storage() const noexcept { return weight_storage(); }
  // The mechanism of a quantized weight_storage(); null for f32 and bf16. Owned by the policy.
  virtual WeightQuantizer* weight_quantizer() noexcept { return nullptr; }
  // How the bf16 weights (and embeddings) are rounded from their f32 masters; null: to nearest
  // even. Owned by the policy. A rounding with no bf16 storage to round is refused at validate time.
  virtual Bf16Rounding* bf16_rounding() noexcept { return nullptr; }
  // Storage of the activations a block keeps for its backward pass.
  virtual DType activation_storage() const noexcept = 0;
  // The phase of the step about to run (every step is `full` without a phase controller; an
  // evaluation runs as `full`). A policy may compute differently per phase: its loss_scale() and
  // matmuls then follow the phase until the next call.
  virtual void begin_step(Phase /*phase*/) noexcept {}
  // The factor the loss gradient is multiplied by before backward.
  virtual double loss_scale() const noexcept = 0;
  // Divides gradients by the loss scale and checks them (through `ops`: the gradients are the
  // backend's memory); may adjust the scale for the next step. May throw: the host reports it.
  virtual Status unscale_and_check(Ops& ops, std::span<const TensorView> grads, PrecisionDecision& decision) = 0;
  // What a resumed run needs to continue bitwise (a dynamic loss scale and its counters), as text
  // that checkpoints keep (called at each save); empty for a stateless policy. restore_state (on
  // --resume) gets back what state() gave (an empty text: a checkpoint saved without state, keep the
  // initial one) and says why not. Either may throw: the host reports it.
  virtual Status state(std::string& out) const {
    out.clear();
    return {};
  }
  virtual Status restore_state(std::string_view /*state*/) { return {}; }
};

}  // namespace strata
