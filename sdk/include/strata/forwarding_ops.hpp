#pragma once
// An op table that forwards every op to another: derive from it and intercept only the ops you
// change in run(), handing the rest on (the host's quantized-weight matmuls do:
// core/tensor/quantized_matmul_ops.hpp). Ops are records (strata/op_records.hpp), so a new op passes
// through every wrapper unchanged. A wrapper that changes what a bf16 weight's matmuls compute must
// also intercept the bf16-input matmuls, or answer false for them in supports(): the model calls
// those instead where the backend offers them.
#include "strata/ops.hpp"

namespace strata {

class ForwardingOps : public Ops {
 public:
  explicit ForwardingOps(Ops& base) noexcept : base_(base) {}

  std::string_view backend() const noexcept override { return base_.backend(); }
  bool supports(Op op) const noexcept override { return base_.supports(op); }
  void run(Op op, void* record) noexcept override { base_.run(op, record); }
  using Ops::run;

 protected:
  Ops& base() const noexcept { return base_; }

 private:
  Ops& base_;
};

}  // namespace strata
