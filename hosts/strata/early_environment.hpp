#pragma once
// The environment as the loader hands it to the executable's preinit functions, which run before
// any library's initialiser (C's getenv among them is not ready yet).
#include <string_view>

namespace strata {

// The value of `name` in the environment block, or null.
inline const char* early_environment_value(char** environment, std::string_view name) {
  for (char** entry = environment; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=')
      return *entry + name.size() + 1;
  }
  return nullptr;
}

}  // namespace strata
