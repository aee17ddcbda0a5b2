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
  // While the executor updates rows that all live in host memory (set_update_on_host), the
  // backend's host op table: the optimizer's ops run on the host's cores, with the device's bits,
  // instead of across the bus. target() stays the backend's (a quantizer's kernel there still runs
  // on its compute stream).
  Ops& ops() noexcept override {
    if (backend_ == nullptr) return *cpu_ops_;
    return update_on_host_ ? backend_->host_ops() : backend_->ops();
  }
  KernelTarget target() const noexcept override {
    return backend_ != nullptr ? backend_->kernel_target() : KernelTarget{device_kind_, -1, nullptr};
  }
  void set_update_on_host(bool on_host) noexcept { update_on_host_ = on_host; }
  // Not a plugin's: for_plugin() gives the view a plugin's memory() works in.
  PluginMemory& memory() override;
  // From now on plugins reach `backend` (which outlives them).
  void use_backend(Backend& backend) noexcept { backend_ = &backend; }
  // The planner's dry run (core/planner/) says so to the plugins.
  bool planning() const noexcept override { return planning_; }
  void set_planning(bool planning) noexcept { planning_ = planning; }
  bool has(Service service) const noexcept override;
  // The run keeps a disk tier (Service::disk_tier).
  void set_disk_tier(bool present) noexcept { disk_tier_ = present; }

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
  bool update_on_host_ = false;
  bool disk_tier_ = false;
};

}  // namespace strata
