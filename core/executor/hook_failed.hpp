#pragma once
#include <stdexcept>
#include <string>

namespace strata {

// A strategy's hook or a plugin call returned an error Status.
class HookFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace strata
