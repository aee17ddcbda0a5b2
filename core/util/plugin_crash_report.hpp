#pragma once
// Which plugin call the process is inside, so that a plugin that crashes (a segfault, a bus error,
// an abort in its own code) is named on the way down: "strata: [[strategy]] #1 'x' crashed in
// after_forward (layer 1, step 2): SIGSEGV". The host's call policy (guarded_plugins.hpp), the
// weight quantizer's matmuls and the activation codecs open a scope around each call; the signal
// handler, installed once by the program, writes the line with write(2) alone and then lets the
// signal end the process as it would have (exit 128 + the signal, a core dump where enabled).
//
// The scopes are the plugin registry's process-wide state (core/plugin/plugin_registry.hpp): one
// per thread, and the last one any thread opened, for a crash on a thread the plugin started
// (OpenMP's workers). The file sits at the bottom of core, needing nothing above it, because the
// tensor store's quantized matmuls and the model's activation codecs open scopes too.
#include <cstdint>
#include <string_view>

namespace strata {

class PluginCallScope {
 public:
  // `label` and `hook` must outlive the scope (a policy's label, a string literal). layer -1 and
  // step 0: not known or not part of the call.
  PluginCallScope(std::string_view label, std::string_view hook, int layer, std::int64_t step) noexcept;
  ~PluginCallScope();
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;

  std::string_view label;
  std::string_view hook;
  int layer;
  std::int64_t step;

 private:
  const PluginCallScope* outer_;
};

// Installs the handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (keeping whatever handler
// was there to run after it). Once per process; later calls do nothing.
void install_plugin_crash_report() noexcept;

}  // namespace strata
