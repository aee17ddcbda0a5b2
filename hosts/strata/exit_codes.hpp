#pragma once

namespace strata {

// Documented in README.md and docs/manifest.md.
enum ExitCode : int {
  kExitSuccess = 0,
  kExitRunFailed = 1,     // memory budget exceeded, divergence, I/O error while training, a plugin failing mid-run
  kExitInvalidInput = 2,  // manifest, data, plugin, checkpoint, command line
};

}  // namespace strata
