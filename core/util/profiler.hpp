#pragma once
// Wall time per kernel kind, accumulated across a run; cheap enough to stay on (two clock reads a
// kernel call). `strata train --profile` prints it; the benchmark reads it for its breakdown.
#include <array>
#include <chrono>
#include <cstdint>
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
  residual_forward,
  lm_head_forward,
  cross_entropy_forward,
  cross_entropy_backward,
  lm_head_backward,
  matmul_backward,
  attention_backward,
  gelu_backward,
  swiglu_backward,
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
    Scope(Profiler& profiler, ProfileKind kind) : profiler_(profiler), kind_(kind), start_(Clock::now()) {}
    ~Scope() { profiler_.add(kind_, std::chrono::duration<double, std::milli>(Clock::now() - start_).count()); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Profiler& profiler_;
    ProfileKind kind_;
    std::chrono::steady_clock::time_point start_;
  };
  using Clock = std::chrono::steady_clock;

  Scope scope(ProfileKind kind) { return Scope(*this, kind); }
  void add(ProfileKind kind, double ms) noexcept { ms_[static_cast<std::size_t>(kind)] += ms; }
  double ms(ProfileKind kind) const noexcept { return ms_[static_cast<std::size_t>(kind)]; }
  void reset() noexcept { ms_.fill(0.0); }
  // Kinds sorted by time, with share of the total, per step when `steps` > 0.
  void print(std::ostream& out, std::int64_t steps) const;

 private:
  std::array<double, static_cast<std::size_t>(ProfileKind::count)> ms_{};
};

}  // namespace strata
