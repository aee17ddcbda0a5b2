#pragma once
// A memory strategy acts at hook points of the step (DESIGN.md §2). Hooks run in manifest order
// going down (forward, before_step) and in reverse order coming up (backward, after_step).
// Every hook has a default that does nothing.
#include "strata/hook_context.hpp"
#include "strata/status.hpp"

namespace strata {

class MemoryStrategy {
 public:
  virtual ~MemoryStrategy() = default;
  virtual Status on_attach(HookContext&) noexcept { return {}; }
  virtual Status before_forward(HookContext&) noexcept { return {}; }
  virtual Status after_forward(HookContext&) noexcept { return {}; }
  virtual Status before_backward(HookContext&) noexcept { return {}; }
  virtual Status after_backward(HookContext&) noexcept { return {}; }
  virtual Status before_step(HookContext&) noexcept { return {}; }
  virtual Status after_step(HookContext&) noexcept { return {}; }
};

}  // namespace strata
