#include "core/plugin/host_services_impl.hpp"

#include <spdlog/spdlog.h>

#include "kernels/cpu/cpu_ops.hpp"

namespace strata {

HostServicesImpl::HostServicesImpl(ModelInfo model, std::string device_kind)
    : model_(model), device_kind_(std::move(device_kind)), cpu_ops_(cpu::make_cpu_ops()) {}

HostServicesImpl::~HostServicesImpl() = default;

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
