#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/status.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

inline constexpr int kMaxOptimizerStateBuffers = 2;

// One parameter tensor, its gradient and its optimizer state buffers (as many as the optimizer
// asked for through state_buffers(); the host allocates them, so they are accounted and movable).
// All f32 views of the backend's memory: the optimizer updates them with the ops HostServices
// lends it (HostServices::ops()), never by reading them on the host. `param` is the f32 master
// copy when the weights are stored as bf16.
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

struct OptimizerReport {
  double lr = 0.0;
  double grad_norm = 0.0;  // before clipping
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // f32 buffers of the parameter's size that this optimizer keeps per parameter.
  virtual int state_buffers() const noexcept = 0;
  // May throw: the host reports any exception with the plugin's name, as it does an error Status.
  virtual Status step(const OptimizerStepInfo& info, std::span<ParamSlot> slots, OptimizerReport& report) = 0;
};

}  // namespace strata
