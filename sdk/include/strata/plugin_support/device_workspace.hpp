#pragma once
// Device scratch for a plugin's kernels on an accelerator, from the plugin's own accounted memory
// (HostServices::memory(), counted under the plugin's name as workspace). It grows to the largest
// request, releasing the buffer it outgrew (frees are ordered on the backend's compute stream, after
// the kernels that used it). A request that cannot be met is logged and answered with null, for the
// caller to fail its product visibly.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "strata/host_services.hpp"

namespace strata::plugin_support {

class DeviceWorkspace {
 public:
  DeviceWorkspace(HostServices& host, std::string name) : host_(host), name_(std::move(name)) {}

  // A size to allocate at once when the first request comes (the largest known so far).
  void expect(std::int64_t floats) noexcept { expected_ = std::max(expected_, floats); }

  // At least `floats` floats of device memory, or null (logged).
  float* floats(std::int64_t floats) noexcept {
    if (floats <= capacity_) return data_;
    const std::int64_t wanted = std::max(floats, expected_);
    try {
      if (data_ != nullptr) host_.memory().release(std::exchange(data_, nullptr));
      capacity_ = 0;
      data_ = host_.memory().device_floats(name_, static_cast<std::uint64_t>(wanted), MemoryCategory::workspace).f32();
      capacity_ = wanted;
      return data_;
    } catch (const std::exception& error) {
      host_.log(LogLevel::error, name_ + ": no device memory for " + std::to_string(wanted * 4) +
                                     " bytes of workspace: " + error.what());
      return nullptr;
    }
  }

 private:
  HostServices& host_;
  std::string name_;
  float* data_ = nullptr;
  std::int64_t capacity_ = 0;
  std::int64_t expected_ = 0;
};

// A product that could not run reads NaN, so the step's finiteness check stops the run (exit 1)
// after the workspace's log line, rather than training on what the output held before.
inline void fill_nan(Ops& ops, float* out, std::int64_t count) noexcept {
  ops.fill(out, 0xff, static_cast<std::uint64_t>(count) * sizeof(float));
}

}  // namespace strata::plugin_support
