#pragma once
#include <memory>
#include <string>

#include "core/device/backend.hpp"
#include "strata/host_services.hpp"

namespace strata {

// What the host lends plugins: spdlog logging, the model's shape and the backend's op table.
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
  // From now on plugins reach `backend` (which outlives them).
  void use_backend(Backend& backend) noexcept { backend_ = &backend; }

 private:
  ModelInfo model_;
  std::string device_kind_;
  std::unique_ptr<Ops> cpu_ops_;
  Backend* backend_ = nullptr;
};

}  // namespace strata
