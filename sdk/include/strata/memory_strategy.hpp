#pragma once
// A memory strategy acts at hook points of the step (docs/architecture.md, "The step"). Hooks run
// in manifest order going down (forward, before_step) and in reverse order coming up (backward,
// after_step). Every hook has a default that does nothing. A hook reports failure by returning an
// error Status; it may also throw: the host catches any exception and reports it, as it does an
// error, with the plugin's name, the hook, the layer and the step. (Do not mark an override
// noexcept: a throw from a noexcept function ends the process before the host can report it.)
#include <string>
#include <string_view>

#include "strata/activation_codec.hpp"
#include "strata/hook_context.hpp"
#include "strata/parameter_plan.hpp"
#include "strata/status.hpp"

namespace strata {

class MemoryStrategy {
 public:
  virtual ~MemoryStrategy() = default;
  virtual Status on_attach(HookContext&) { return {}; }
  virtual Status before_forward(HookContext&) { return {}; }
  virtual Status after_forward(HookContext&) { return {}; }
  virtual Status before_backward(HookContext&) { return {}; }
  virtual Status after_backward(HookContext&) { return {}; }
  virtual Status before_step(HookContext&) { return {}; }
  virtual Status after_step(HookContext&) { return {}; }
  // Called once before the model is built, to freeze or skip parts of it (sparse layers).
  virtual Status plan_parameters(ParameterPlan&) { return {}; }
  // State the strategy keeps across a resume, as bytes: saved beside each checkpoint
  // (strategy_N_<plugin>.bin) when not empty, handed back on --resume before the first step. An
  // error from restore_state refuses the resume with the plugin's sentence (a checkpoint saved by
  // another configuration). restore_state gets an empty view from a checkpoint that holds none
  // (saved before SDK 9.0, or by a strategy with nothing to keep).
  virtual Status state(std::string& /*out*/) { return {}; }
  virtual Status restore_state(std::string_view /*saved*/) { return {}; }
  // The codec this strategy stores saved activations with (strata/activation_codec.hpp), or null.
  // Owned by the strategy; asked once, before the model is built.
  virtual ActivationCodec* activation_codec() noexcept { return nullptr; }
};

}  // namespace strata
