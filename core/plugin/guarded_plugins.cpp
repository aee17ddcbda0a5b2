#include "core/plugin/guarded_plugins.hpp"

#include <exception>
#include <string_view>
#include <utility>

#include "core/util/plugin_crash_report.hpp"
#include "strata/plugin_guard.hpp"

namespace strata {

namespace {

std::string where(const forwarding::CallSite& site) {
  if (!site.moment.empty()) return " (" + std::string(site.moment) + ")";
  if (site.context != nullptr) {
    const HookContext& context = *site.context;
    if (context.layer() < 0) return " (step " + std::to_string(context.step()) + ")";
    return " (layer " + std::to_string(context.layer()) + ", step " + std::to_string(context.step()) + ")";
  }
  if (site.layer >= 0) return " (layer " + std::to_string(site.layer) + ", step " + std::to_string(site.step) + ")";
  if (site.step > 0) return " (step " + std::to_string(site.step) + ")";
  return {};
}

// Runs one plugin call and returns its Status: an error names the plugin, the hook and the site.
Status guarded(const std::string& label, std::string_view hook, const forwarding::CallSite& site,
               const std::function<Status()>& body) noexcept {
  try {
    Status status = body();
    if (status) return status;
    // The SDK's adapter in the plugin caught an exception (plugin_guard.hpp).
    if (status.message().starts_with(plugin_guard::kThrew))
      return Status::error(label + " threw in " + std::string(hook) + where(site) + ": " +
                           status.message().substr(plugin_guard::kThrew.size()));
    return Status::error(label + " failed in " + std::string(hook) + where(site) + ": " + status.message());
  } catch (const std::exception& e) {  // an object not made by make_factory
    return Status::error(label + " threw in " + std::string(hook) + where(site) + ": " + e.what());
  } catch (...) {
    return Status::error(label + " threw in " + std::string(hook) + where(site) +
                         ": an exception that is not a std::exception (no message)");
  }
}

}  // namespace

Status HostCallPolicy::call(std::string_view hook, const forwarding::CallSite& site,
                            const std::function<Status()>& body) const noexcept {
  // Named if the plugin crashes in the call (plugin_crash_report.hpp).
  const bool in_a_hook = site.context != nullptr;
  const PluginCallScope scope(label, hook, in_a_hook ? site.context->layer() : site.layer,
                              in_a_hook ? site.context->step() : site.step);
  return guarded(label, hook, site, body);
}

// A refusal is the plugin's own sentence (the host names the manifest key around it); only an
// exception is worded as a failure of the plugin.
Status HostCallPolicy::answer(std::string_view hook, const std::function<Status()>& body) const noexcept {
  Status reply;
  const PluginCallScope scope(label, hook, -1, 0);
  const Status failure = guarded(label, hook, {}, [&] {
    reply = body();
    return reply.message().starts_with(plugin_guard::kThrew) ? reply : Status{};
  });
  return failure ? reply : failure;
}

template <typename Interface>
std::shared_ptr<Interface> guard_plugin(std::shared_ptr<Interface> plugin, std::string label, std::uint32_t sdk_minor) {
  return forwarding::wrap(std::move(plugin), HostCallPolicy{std::move(label), sdk_minor});
}

template std::shared_ptr<MemoryStrategy> guard_plugin(std::shared_ptr<MemoryStrategy>, std::string, std::uint32_t);
template std::shared_ptr<Optimizer> guard_plugin(std::shared_ptr<Optimizer>, std::string, std::uint32_t);
template std::shared_ptr<PrecisionPolicy> guard_plugin(std::shared_ptr<PrecisionPolicy>, std::string, std::uint32_t);
template std::shared_ptr<TelemetrySink> guard_plugin(std::shared_ptr<TelemetrySink>, std::string, std::uint32_t);
template std::shared_ptr<Kernel> guard_plugin(std::shared_ptr<Kernel>, std::string, std::uint32_t);
template std::shared_ptr<PhaseController> guard_plugin(std::shared_ptr<PhaseController>, std::string, std::uint32_t);

}  // namespace strata
