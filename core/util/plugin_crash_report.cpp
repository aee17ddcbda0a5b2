#include "core/util/plugin_crash_report.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

namespace strata {

namespace {

constexpr std::array kSignals = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

thread_local const PluginCallScope* current_scope = nullptr;
std::atomic<const PluginCallScope*> latest_scope{nullptr};
std::array<struct sigaction, kSignals.size()> previous_actions{};
std::atomic<bool> installed{false};

void write_text(std::string_view text) noexcept {
  while (!text.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
    if (written <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

void write_number(std::int64_t value) noexcept {
  char digits[24];
  std::size_t at = sizeof digits;
  const bool negative = value < 0;
  std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
  do {
    digits[--at] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0 && at > 1);
  if (negative) digits[--at] = '-';
  write_text({digits + at, sizeof digits - at});
}

std::string_view signal_name(int signal) noexcept {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGFPE: return "SIGFPE (arithmetic fault)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGABRT: return "SIGABRT (aborted)";
  }
  return "a fatal signal";
}

// Async-signal-safe: reads the scopes, writes with write(2), restores and re-raises.
void report(int signal) noexcept {
  const PluginCallScope* scope = current_scope != nullptr ? current_scope : latest_scope.load();
  if (scope != nullptr) {
    write_text("strata: ");
    write_text(scope->label);
    write_text(" crashed in ");
    write_text(scope->hook);
    if (scope->layer >= 0) {
      write_text(" (layer ");
      write_number(scope->layer);
      write_text(scope->step > 0 ? ", step " : ")");
      if (scope->step > 0) {
        write_number(scope->step);
        write_text(")");
      }
    } else if (scope->step > 0) {
      write_text(" (step ");
      write_number(scope->step);
      write_text(")");
    }
    write_text(": ");
    write_text(signal_name(signal));
    write_text("; the plugin is at fault, not the run's data (saves already written are whole)\n");
  }
  for (std::size_t i = 0; i < kSignals.size(); ++i)
    if (kSignals[i] == signal) ::sigaction(signal, &previous_actions[i], nullptr);
  ::raise(signal);
}

void handle(int signal) {
  report(signal);
}

}  // namespace

PluginCallScope::PluginCallScope(std::string_view label_, std::string_view hook_, int layer_,
                                 std::int64_t step_) noexcept
    : label(label_), hook(hook_), layer(layer_), step(step_), outer_(current_scope) {
  current_scope = this;
  latest_scope.store(this);
}

PluginCallScope::~PluginCallScope() {
  current_scope = outer_;
  const PluginCallScope* self = this;
  latest_scope.compare_exchange_strong(self, outer_);
}

void install_plugin_crash_report() noexcept {
  if (installed.exchange(true)) return;
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_handler = handle;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_NODEFER | SA_RESETHAND;
    ::sigaction(kSignals[i], &action, &previous_actions[i]);
  }
}

}  // namespace strata
