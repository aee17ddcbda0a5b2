#include "kernels/cpu/cuda_order_ops.hpp"

#include "kernels/cpu/cpu_ops.hpp"
#include "kernels/cpu/cuda_order_reductions.hpp"
#include "strata/forwarding_ops.hpp"

namespace strata::cpu {

namespace {

// The CPU table is made before the forwarding base that refers to it.
struct OwnedCpuOps {
  std::unique_ptr<Ops> cpu = make_cpu_ops();
};

class CpuOpsInCudaOrder final : private OwnedCpuOps, public ForwardingOps {
 public:
  CpuOpsInCudaOrder() : ForwardingOps(*cpu) {}
  using Ops::run;
  void run(Op id, void* record) noexcept override {
    if (id == Op::sum_of_squares) {
      auto& r = record_of<op::SumOfSquares>(record);
      r.result = sum_of_squares_in_cuda_order(r.values, r.count);
    } else if (id == Op::sum) {
      auto& r = record_of<op::Sum>(record);
      r.result = sum_in_cuda_order(r.values, r.count);
    } else {
      ForwardingOps::run(id, record);
    }
  }
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops_in_cuda_order() {
  return std::make_unique<CpuOpsInCudaOrder>();
}

}  // namespace strata::cpu
