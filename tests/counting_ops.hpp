#pragma once
// An op table that forwards every op to another and counts the ones an optimizer update runs: how
// tests see which table an update went through (the host's, Backend::host_ops, or the device's).
#include "strata/forwarding_ops.hpp"

namespace strata::test {

struct HostOpCalls {
  int adamw = 0;
  int sum_of_squares = 0;
  int narrow = 0;
  int all_finite = 0;
};

class CountingOps final : public ForwardingOps {
 public:
  // `calls` may be null (nothing counted); it must outlive this table.
  CountingOps(Ops& base, HostOpCalls* calls) noexcept : ForwardingOps(base), calls_(calls) {}
  void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                    const AdamWHyper& hyper) noexcept override {
    if (calls_ != nullptr) ++calls_->adamw;
    ForwardingOps::adamw_update(param, grad, m, v, count, hyper);
  }
  double sum_of_squares(const float* values, std::int64_t count) noexcept override {
    if (calls_ != nullptr) ++calls_->sum_of_squares;
    return ForwardingOps::sum_of_squares(values, count);
  }
  bool all_finite(const float* values, std::int64_t count) noexcept override {
    if (calls_ != nullptr) ++calls_->all_finite;
    return ForwardingOps::all_finite(values, count);
  }
  void narrow(std::uint16_t* out, const float* in, std::int64_t count) noexcept override {
    if (calls_ != nullptr) ++calls_->narrow;
    ForwardingOps::narrow(out, in, count);
  }

 private:
  HostOpCalls* calls_;
};

}  // namespace strata::test
