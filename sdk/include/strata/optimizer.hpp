#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/dtype.hpp"
#include "strata/op_records.hpp"
#include "strata/status.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

inline constexpr int kMaxOptimizerStateBuffers = 4;

// One state buffer an optimizer keeps per parameter: its element type and length. AdamW keeps two
// f32 buffers of the parameter's length; an 8-bit optimizer keeps u8 codes and f32 block scales.
struct StateBuffer {
  DType dtype = DType::f32;
  std::int64_t count = 0;  // elements; 0: the slot is unused
};
using StateLayout = std::array<StateBuffer, kMaxOptimizerStateBuffers>;

// `buffers` f32 buffers of `count` elements each: the layout of most optimizers.
constexpr StateLayout f32_state(int buffers, std::int64_t count) noexcept {
  StateLayout layout{};
  for (int s = 0; s < buffers && s < kMaxOptimizerStateBuffers; ++s)
    layout[static_cast<std::size_t>(s)] = StateBuffer{DType::f32, count};
  return layout;
}

// What a parameter is. matrix: a linear layer's weight (a block's projections, an untied LM head,
// an adapter's factors); embedding: a table whose rows are looked up (token and position
// embeddings; a tied head multiplies by the token table too); norm: a norm's gain or bias; bias: a
// linear layer's bias. (A later minor may append kinds: treat unknown ones as other.)
enum class ParamKind : std::uint8_t { matrix, embedding, norm, bias, other };

constexpr std::string_view param_kind_name(ParamKind kind) noexcept {
  switch (kind) {
    case ParamKind::matrix: return "matrix";
    case ParamKind::embedding: return "embedding";
    case ParamKind::norm: return "norm";
    case ParamKind::bias: return "bias";
    case ParamKind::other: break;
  }
  return "other";
}

// A parameter as an optimizer sees it before anything is allocated (state_layout) and at every
// update (ParamSlot): its name, block, kind and shape. `shape` is the tensor as stored in memory,
// row-major, which is also its gradient's and its master's shape: a token table's rows include the
// padding rows of the padded vocabulary (`padded_vocab` in ModelInfo), which no file stores. For a
// matrix, `layout` says which dimension is the input features (strata/op_records.hpp: in_out,
// GPT-2's Conv1D (in, out); out_in, torch.nn.Linear's (out, in)); embeddings are out_in (vocab or
// positions, channels).
struct ParamInfo {
  std::string_view name;  // "h.3.attn.c_attn.weight"
  int layer = -1;         // -1: outside the blocks (embeddings, final norm, head)
  ParamKind kind = ParamKind::other;
  std::span<const std::int64_t> shape;
  WeightLayout layout = WeightLayout::out_in;
  std::int64_t count = 0;  // elements: the product of shape
  bool decay = false;      // weight decay applies (matrices and embeddings), not to biases or norm gains
};

// One parameter tensor, its gradient and its optimizer state buffers (laid out as the optimizer
// asked through state_layout(); the host allocates them, so they are accounted, movable and saved
// in checkpoints). Views of the backend's memory: the optimizer updates them with the ops
// HostServices lends it (HostServices::ops()) or with its own kernels for the backend
// (HostServices::target()), never by reading device memory on the host. `param` is the f32
// master copy when the weights are stored as bf16 or int8.
struct ParamSlot : ParamInfo {
  TensorView param;
  TensorView grad;
  std::array<TensorView, kMaxOptimizerStateBuffers> state{};
};

struct OptimizerStepInfo {
  std::int64_t step = 1;  // 1-based
  std::int64_t total_steps = 1;
  std::int64_t warmup_steps = 0;
  double base_lr = 3e-4;
};

// One of a parameter's state buffers as a checkpoint holds it, read into host memory
// (Optimizer::check_state): its dtype and bytes, in the buffer's layout.
struct SavedStateBuffer {
  DType dtype = DType::f32;
  std::span<const std::byte> bytes;
  std::span<const float> f32() const noexcept {
    return {reinterpret_cast<const float*>(bytes.data()), bytes.size() / sizeof(float)};
  }
};

struct OptimizerReport {
  double lr = 0.0;
  double grad_norm = 0.0;  // before clipping
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // The state this optimizer keeps for a parameter (param.count elements); unused slots have count 0.
  // Called once per parameter before anything is allocated; the same parameter always gets the same
  // layout.
  virtual StateLayout state_layout(const ParamInfo& param) const noexcept = 0;
  // May throw: the host reports any exception with the plugin's name, as it does an error Status.
  virtual Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) = 0;
  // (optional, since 9.1) Checks one parameter's saved state before a resume uses it, and returns an
  // error saying what breaks this optimizer's invariants (AdamW: a negative second moment). The host
  // has already checked each buffer's dtype and length, and that every f32 value is finite; a
  // refusal is a corrupt checkpoint, reported before anything is trained or saved. Default: accept.
  virtual Status check_state(std::string_view parameter, std::span<const SavedStateBuffer> buffers) const noexcept {
    (void)parameter;
    (void)buffers;
    return {};
  }

  // ABI 9.3 -------------------------------------------------------------------------------------
  // (optional, since 9.3) The step in parts, for state that is never all in memory at once (the
  // disk tier, HookContext::evict_to_disk). begin_step sees every trained parameter's gradient,
  // with `param` and `state` views that may be empty (their bytes are on disk), and settles what
  // the whole step shares: the schedule's lr, the global gradient norm and its clipping. Then
  // step_part updates some of the slots, with everything in memory; each slot comes in exactly one
  // part per step, in the model's order. The parts together must give step()'s bits. The host calls
  // them only when steps_in_parts() says so; an optimizer without them keeps its state off the disk.
  virtual bool steps_in_parts() const noexcept { return false; }
  virtual Status begin_step(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, OptimizerReport& report) {
    (void)info;
    (void)slots;
    (void)report;
    return Status::error("this optimizer does not step in parts");
  }
  virtual Status step_part(const OptimizerStepInfo& info, std::span<ParamSlot> slots) {
    (void)info;
    (void)slots;
    return Status::error("this optimizer does not step in parts");
  }

  // ABI 9.4 -------------------------------------------------------------------------------------
  // (optional, since 9.4) The fused update (train.update = "fused") steps each block as soon as its
  // gradients are complete: per block, begin_step (fused_clip = "per_block") or begin_step_with_norm
  // over that block's slots alone, then step_part over the same slots; blocks from the last to the
  // first, the globals last. So the step's global norm does not exist yet: begin_step_with_norm
  // clips by a norm the host gives (the last step's global norm) instead of the slots' own; the
  // report's grad_norm stays the slots' own. clips_by_given_norm() says the optimizer takes both
  // (the host refuses the fused update otherwise).
  virtual bool clips_by_given_norm() const noexcept { return false; }
  virtual Status begin_step_with_norm(const OptimizerStepInfo& info, std::span<const ParamSlot> slots, double clip_norm,
                                      OptimizerReport& report) {
    (void)info;
    (void)slots;
    (void)clip_norm;
    (void)report;
    return Status::error("this optimizer does not clip by a given norm");
  }

  // ABI 9.10 ------------------------------------------------------------------------------------
  // (optional, since 9.10) Whether the host may run this optimizer's update of slots that all live
  // in host memory (offloaded optimizer state) on its own cores: HostServices::ops() is then the
  // backend's host op table, which gives the device's bits, and its backend() is "cpu", so a plugin
  // with its own kernels runs its CPU kernel (docs/architecture.md, "The update on the host"). Say
  // yes only if the update touches nothing but the slots and host memory: scratch from
  // memory().device_floats is device memory the host cannot touch. Default: no, and the update runs
  // on the device, reading host rows across the bus.
  virtual bool can_update_on_host() const noexcept { return false; }
};

}  // namespace strata
