#include "core/training/stop_signal.hpp"

#include <unistd.h>

#include <atomic>

namespace strata {

namespace {

// A signal handler can reach nothing but static storage, so this one flag is global (the only
// global besides the plugin registry); lock-free, as a handler requires.
std::atomic<int> stop_requested{0};
static_assert(std::atomic<int>::is_always_lock_free);

// The first signal asks for a stop after the step in hand; a second one stops now (a step that
// cannot finish, or a user who will not wait), as `timeout -k` or a second Ctrl-C expects.
extern "C" void record_stop(int signal) {
  if (stop_requested.exchange(signal, std::memory_order_relaxed) != 0) {
    constexpr char kMessage[] = "\nstrata: a second stop signal: exiting now, without finishing the step in hand\n";
    [[maybe_unused]] const auto written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    ::_exit(128 + signal);
  }
}

}  // namespace

StopSignal::StopSignal() {
  stop_requested.store(0, std::memory_order_relaxed);
  struct sigaction action {};
  action.sa_handler = record_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_interrupt_);
  sigaction(SIGTERM, &action, &previous_terminate_);
}

StopSignal::~StopSignal() {
  sigaction(SIGINT, &previous_interrupt_, nullptr);
  sigaction(SIGTERM, &previous_terminate_, nullptr);
}

int StopSignal::received() const noexcept {
  return stop_requested.load(std::memory_order_relaxed);
}

}  // namespace strata
