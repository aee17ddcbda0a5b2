#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "core/plugin/plugin_memory_impl.hpp"
#include "strata/host_services.hpp"

namespace strata {

// What the host lends plugins: spdlog logging, the model's shape and the backend's op table; each
// plugin gets its own view (for_plugin), whose memory() is accounted under the plugin's name.
class HostServicesImpl final : public HostServices {
 public:
  // `device_kind`: the manifest's device.kind, which target() names until a backend is in use.
  explicit HostServicesImpl(ModelInfo model, std::string device_kind = "cpu");
  ~HostServicesImpl() override;
  void log(LogLevel level, std::string_view message) noexcept override;
  const ModelInfo& model() const noexcept override { return model_; }
  // The run's backend, once it exists (plugins are created first). Until then, and in tools that
  // build no backend, the CPU op table.
  Ops& ops() noexcept override { return backend_ != nullptr ? backend_->ops() : *cpu_ops_; }
  KernelTarget target() const noexcept override {
    return backend_ != nullptr ? backend_->kernel_target() : KernelTarget{device_kind_, -1, nullptr};
  }
  // Not a plugin's: for_plugin() gives the view a plugin's memory() works in.
  PluginMemory& memory() override;
  // From now on plugins reach `backend` (which outlives them).
  void use_backend(Backend& backend) noexcept { backend_ = &backend; }
  // The planner's dry run (core/planner/) says so to the plugins.
  bool planning() const noexcept override { return planning_; }
  void set_planning(bool planning) noexcept { planning_ = planning; }

  // The services one plugin is created with: these, with memory() under `owner`'s name. Lives as
  // long as this object.
  HostServices& for_plugin(const std::string& owner);
  // The memory of every plugin that asked for some, for the run summary.
  std::vector<const PluginMemoryImpl*> plugin_memory() const;

 private:
  class PluginView;
  std::vector<std::unique_ptr<PluginView>> plugin_views_;
  ModelInfo model_;
  std::string device_kind_;
  std::unique_ptr<Ops> cpu_ops_;
  Backend* backend_ = nullptr;
  bool planning_ = false;
};

}  // namespace strata
