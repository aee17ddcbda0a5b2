#pragma once
#include "strata/host_services.hpp"

namespace strata {

// What the host lends plugins: spdlog logging, the model's shape and the CPU kernels.
class HostServicesImpl final : public HostServices, public KernelLibrary {
 public:
  explicit HostServicesImpl(ModelInfo model) : model_(model) {}
  void log(LogLevel level, std::string_view message) noexcept override;
  const ModelInfo& model() const noexcept override { return model_; }
  KernelLibrary& kernels() noexcept override { return *this; }
  void adamw_update(std::span<float> param, std::span<const float> grad, std::span<float> m, std::span<float> v,
                    const AdamWHyper& hyper) noexcept override;
  double sum_of_squares(std::span<const float> values) noexcept override;

 private:
  ModelInfo model_;
};

}  // namespace strata
