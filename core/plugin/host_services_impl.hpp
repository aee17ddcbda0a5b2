#pragma once
#include <memory>

#include "strata/host_services.hpp"

namespace strata {

// What the host lends plugins: spdlog logging, the model's shape and the backend's op table.
class HostServicesImpl final : public HostServices {
 public:
  explicit HostServicesImpl(ModelInfo model);
  ~HostServicesImpl() override;
  void log(LogLevel level, std::string_view message) noexcept override;
  const ModelInfo& model() const noexcept override { return model_; }
  // The run's backend, once it exists (plugins are created first). Until then, and in tools that
  // build no backend, the CPU op table.
  Ops& ops() noexcept override { return backend_ops_ != nullptr ? *backend_ops_ : *cpu_ops_; }
  void set_ops(Ops& ops) noexcept { backend_ops_ = &ops; }

 private:
  ModelInfo model_;
  std::unique_ptr<Ops> cpu_ops_;
  Ops* backend_ops_ = nullptr;
};

}  // namespace strata
