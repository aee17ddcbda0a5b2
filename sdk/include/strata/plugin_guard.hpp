#pragma once
// Exceptions never cross the library boundary: make_factory wraps every object a plugin creates
// in a forwarder (strata/forwarding.hpp) with this policy, compiled into the plugin itself (it is
// header-only). It turns any exception a call throws, std::exception or not, into an error Status
// ("threw: <what>"), caught by the plugin's own runtime. The host then names the plugin, the hook,
// the layer and the step. Plugin authors never see this.
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "strata/forwarding.hpp"

namespace strata::plugin_guard {

// How an adapter's error Status says that the plugin threw; the host words it "threw in <hook>".
inline constexpr std::string_view kThrew = "threw: ";

template <typename Body>
Status catch_all(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return Status::error(std::string(kThrew) + e.what());
  } catch (...) {
    return Status::error(std::string(kThrew) + "an exception that is not a std::exception (no message)");
  }
}

// The plugin's side: it was compiled with every entry point it knows, so has() is always true.
struct CatchAll {
  bool has(std::uint32_t /*since_minor*/) const noexcept { return true; }
  template <typename Body>
  Status call(std::string_view /*hook*/, const forwarding::CallSite& /*site*/, Body&& body) const noexcept {
    return catch_all(std::forward<Body>(body));
  }
  template <typename Body>
  Status answer(std::string_view /*hook*/, Body&& body) const noexcept {
    return catch_all(std::forward<Body>(body));
  }
};

template <typename Interface>
std::unique_ptr<Interface> wrap(std::unique_ptr<Interface> object) {
  return forwarding::wrap(std::shared_ptr<Interface>(std::move(object)), CatchAll{});
}

}  // namespace strata::plugin_guard
