#include "core/plugin/host_services_impl.hpp"

#include <spdlog/spdlog.h>

#include "kernels/cpu/adamw.hpp"

namespace strata {

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

void HostServicesImpl::adamw_update(std::span<float> param, std::span<const float> grad, std::span<float> m,
                                    std::span<float> v, const AdamWHyper& hyper) noexcept {
  cpu::adamw_update(param.data(), grad.data(), m.data(), v.data(), static_cast<std::int64_t>(param.size()), hyper);
}

double HostServicesImpl::sum_of_squares(std::span<const float> values) noexcept {
  return cpu::sum_of_squares(values.data(), static_cast<std::int64_t>(values.size()));
}

}  // namespace strata
