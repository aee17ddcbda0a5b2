#include "core/plugin/host_services_impl.hpp"

#include <spdlog/spdlog.h>

#include <optional>
#include <stdexcept>

#include "kernels/cpu/cpu_ops.hpp"

namespace strata {

// One plugin's services: the shared ones, with memory under the plugin's name, made at its first
// use (the backend exists from the first hook on).
class HostServicesImpl::PluginView final : public HostServices {
 public:
  PluginView(HostServicesImpl& host, std::string owner) : host_(host), owner_(std::move(owner)) {}
  void log(LogLevel level, std::string_view message) noexcept override { host_.log(level, message); }
  const ModelInfo& model() const noexcept override { return host_.model(); }
  Ops& ops() noexcept override { return host_.ops(); }
  KernelTarget target() const noexcept override { return host_.target(); }
  bool planning() const noexcept override { return host_.planning(); }
  bool has(Service service) const noexcept override { return host_.has(service); }
  PluginMemory& memory() override {
    if (!memory_) {
      if (host_.backend_ == nullptr)
        throw std::logic_error("plugin '" + owner_ + "' asked for memory before the run's first hook");
      memory_.emplace(*host_.backend_, owner_);
    }
    return *memory_;
  }
  const PluginMemoryImpl* used_memory() const noexcept { return memory_ ? &*memory_ : nullptr; }
  const std::string& owner() const noexcept { return owner_; }

 private:
  HostServicesImpl& host_;
  std::string owner_;
  std::optional<PluginMemoryImpl> memory_;
};

HostServicesImpl::HostServicesImpl(ModelInfo model, std::string device_kind)
    : model_(model), device_kind_(std::move(device_kind)), cpu_ops_(cpu::make_cpu_ops()) {}

HostServicesImpl::~HostServicesImpl() = default;

bool HostServicesImpl::has(Service service) const noexcept {
  switch (service) {
    case Service::memory: return backend_ != nullptr;
    case Service::disk_tier: return disk_tier_;
    case Service::update_on_host: return true;
    case Service::activation_codecs: return true;
    case Service::count: break;
  }
  return false;  // a service of a later minor
}

PluginMemory& HostServicesImpl::memory() {
  throw std::logic_error("memory() is a plugin's: ask the services the plugin was created with");
}

HostServices& HostServicesImpl::for_plugin(const std::string& owner) {
  for (const auto& view : plugin_views_)
    if (view->owner() == owner) return *view;
  return *plugin_views_.emplace_back(std::make_unique<PluginView>(*this, owner));
}

std::vector<const PluginMemoryImpl*> HostServicesImpl::plugin_memory() const {
  std::vector<const PluginMemoryImpl*> used;
  for (const auto& view : plugin_views_)
    if (const PluginMemoryImpl* memory = view->used_memory()) used.push_back(memory);
  return used;
}

void HostServicesImpl::log(LogLevel level, std::string_view message) noexcept {
  try {
    switch (level) {
      case LogLevel::debug: spdlog::debug("{}", message); break;
      case LogLevel::info: spdlog::info("{}", message); break;
      case LogLevel::warn: spdlog::warn("{}", message); break;
      case LogLevel::error: spdlog::error("{}", message); break;
    }
  } catch (...) {
  }
}

}  // namespace strata
