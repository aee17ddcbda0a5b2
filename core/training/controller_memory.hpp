#pragma once
// The memory a phase controller keeps (strata/phase_controller.hpp), allocated from the run's
// accounted arenas under the plugin's name: host memory from the backend's host arena, backend
// memory from its device arena. Freed when this object goes, at the end of the run.
#include <string>
#include <vector>

#include "core/device/backend.hpp"
#include "strata/phase_controller.hpp"

namespace strata {

class ControllerMemory final : public PhaseControllerMemory {
 public:
  ControllerMemory(Backend& backend, std::string owner) : backend_(backend), owner_(std::move(owner)) {}

  std::span<float> host_floats(std::uint64_t count) override;
  TensorView device_floats(std::string_view name, std::uint64_t count) override;

  // What the arenas count under the owner's name now.
  std::uint64_t host_bytes() const;
  std::uint64_t device_bytes() const;

 private:
  Backend& backend_;
  std::string owner_;
  std::vector<Buffer> buffers_;
};

}  // namespace strata
