#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/dtype.hpp"
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

// One parameter tensor, its gradient and its optimizer state buffers (laid out as the optimizer
// asked through state_layout(); the host allocates them, so they are accounted, movable and saved
// in checkpoints). Views of the backend's memory: the optimizer updates them with the ops
// HostServices lends it (HostServices::ops()) or with its own kernels for the backend
// (HostServices::target()), never by reading device memory on the host. `param` is the f32
// master copy when the weights are stored as bf16 or int8.
struct ParamSlot {
  std::string_view name;
  int layer = -1;
  bool decay = false;  // weight decay applies to matrices, not to biases or norm gains
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
  // The state this optimizer keeps for a parameter of `count` elements; unused slots have count 0.
  virtual StateLayout state_layout(std::int64_t count) const noexcept = 0;
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
