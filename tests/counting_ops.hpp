#pragma once
// An op table that forwards every op to another and counts the ones an optimizer update runs: how
// tests see which table an update went through (the host's, Backend::host_ops, or the device's).
#include "strata/forwarding_ops.hpp"

namespace strata::test {

struct HostOpCalls {
  int host_kernels = 0;  // a plugin's host code (an optimizer's update)
  int sum_of_squares = 0;
  int narrow = 0;
  int all_finite = 0;
};

class CountingOps final : public ForwardingOps {
 public:
  // `calls` may be null (nothing counted); it must outlive this table.
  CountingOps(Ops& base, HostOpCalls* calls) noexcept : ForwardingOps(base), calls_(calls) {}
  using Ops::run;
  void run(Op id, void* record) noexcept override {
    if (calls_ != nullptr) {
      if (id == Op::host_kernel) ++calls_->host_kernels;
      if (id == Op::sum_of_squares) ++calls_->sum_of_squares;
      if (id == Op::all_finite) ++calls_->all_finite;
      if (id == Op::narrow) ++calls_->narrow;
    }
    ForwardingOps::run(id, record);
  }

 private:
  HostOpCalls* calls_;
};

}  // namespace strata::test
