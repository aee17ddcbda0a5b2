#pragma once
// SIGINT and SIGTERM during training ask the run to stop after its current step (with a
// checkpoint when [checkpoint] dir is set) instead of killing it mid-step. While a StopSignal
// exists, the first signal only records itself, and a second exits at once (128 + the signal);
// the previous handlers come back when it goes.
#include <csignal>

namespace strata {

class StopSignal {
 public:
  StopSignal();
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The signal received (SIGINT or SIGTERM), or 0.
  int received() const noexcept;

 private:
  struct sigaction previous_interrupt_ {};
  struct sigaction previous_terminate_ {};
};

}  // namespace strata
