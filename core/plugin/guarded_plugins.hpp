#pragma once
// Every plugin object the host calls is wrapped in a forwarder (strata/forwarding.hpp) with the
// host's policy. It words an error Status so that it names the plugin, the hook and where the step
// was: "[[strategy]] #1 'offload' threw in before_forward (layer 3, step 5): ...". Exceptions are
// caught inside the plugin, by the SDK's adapter make_factory wraps each object in
// (strata/plugin_guard.hpp), and arrive here as a Status; this policy also catches, for an object
// made without make_factory. It calls an entry point added in a later SDK minor than the plugin's
// only when the plugin has it (strata/abi.hpp, the version rule).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "strata/abi.hpp"
#include "strata/forwarding.hpp"

namespace strata {

// `label` names the plugin as the manifest does: "[optimizer] 'adamw'", "[[strategy]] #2 'offload'";
// `sdk_minor` is the minor its descriptor records.
template <typename Interface>
std::shared_ptr<Interface> guard_plugin(std::shared_ptr<Interface> plugin, std::string label,
                                        std::uint32_t sdk_minor = kAbiMinor);

// The host's policy, exposed for tests of the version rule.
struct HostCallPolicy {
  std::string label;
  std::uint32_t sdk_minor = kAbiMinor;

  bool has(std::uint32_t since_minor) const noexcept { return sdk_minor >= since_minor; }
  Status call(std::string_view hook, const forwarding::CallSite& site,
              const std::function<Status()>& body) const noexcept;
  Status answer(std::string_view hook, const std::function<Status()>& body) const noexcept;
};

}  // namespace strata
