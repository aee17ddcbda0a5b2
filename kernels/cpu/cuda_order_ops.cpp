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
  double sum_of_squares(const float* values, std::int64_t count) noexcept override {
    return sum_of_squares_in_cuda_order(values, count);
  }
  double sum(const float* values, std::int64_t count) noexcept override { return sum_in_cuda_order(values, count); }
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops_in_cuda_order() {
  return std::make_unique<CpuOpsInCudaOrder>();
}

}  // namespace strata::cpu
