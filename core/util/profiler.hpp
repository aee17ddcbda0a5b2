#pragma once
// Wall time per kernel kind, accumulated across a run; cheap enough to stay on (two clock reads a
// kernel call). `strata train --profile` prints it; the benchmark reads it for its breakdown.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string_view>

namespace strata {

enum class ProfileKind : std::uint8_t {
  embedding_forward,
  layernorm_forward,
  rmsnorm_forward,
  rope,
  matmul_forward,
  attention_forward,
  gelu_forward,
  swiglu_forward,
  geglu_forward,
  residual_forward,
  lm_head_forward,
  cross_entropy_forward,
  cross_entropy_backward,
  lm_head_backward,
  matmul_backward,
  attention_backward,
  gelu_backward,
  swiglu_backward,
  geglu_backward,
  layernorm_backward,
  rmsnorm_backward,
  embedding_backward,
  zero_fill,
  optimizer_step,
  residency_transfer,
  bf16_convert,  // widening bf16 storage to f32 and rounding back
  count
};

std::string_view profile_kind_name(ProfileKind kind) noexcept;

class Profiler {
 public:
  class Scope {
   public:
    Scope(Profiler& profiler, ProfileKind kind) : profiler_(profiler), kind_(kind), start_(fenced_now(profiler)) {}
    ~Scope() {
      profiler_.add(kind_, std::chrono::duration<double, std::milli>(fenced_now(profiler_) - start_).count());
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Profiler& profiler_;
    ProfileKind kind_;
    std::chrono::steady_clock::time_point start_;
  };
  using Clock = std::chrono::steady_clock;

  Scope scope(ProfileKind kind) { return Scope(*this, kind); }
  // On an asynchronous device a kernel call returns before the kernel ran: with a fence (waiting
  // for the device) each scope starts and ends on an idle device, so its time is the device's.
  // Only for --profile: it serialises host and device.
  void set_fence(std::function<void()> fence) { fence_ = std::move(fence); }
  void add(ProfileKind kind, double ms) noexcept { ms_[static_cast<std::size_t>(kind)] += ms; }
  double ms(ProfileKind kind) const noexcept { return ms_[static_cast<std::size_t>(kind)]; }
  void reset() noexcept { ms_.fill(0.0); }
  // Kinds sorted by time, with share of the total, per step when `steps` > 0.
  void print(std::ostream& out, std::int64_t steps) const;

 private:
  static Clock::time_point fenced_now(Profiler& profiler) noexcept {
    if (profiler.fence_) {
      try {
        profiler.fence_();  // waits only: an op's failure stays for the step's synchronize()
      } catch (...) {
      }
    }
    return Clock::now();
  }

  std::array<double, static_cast<std::size_t>(ProfileKind::count)> ms_{};
  std::function<void()> fence_;
};

}  // namespace strata
