#pragma once
// The op table a CUDA backend runs rows in host memory with (Backend::host_ops): the CPU's kernels,
// whose element-wise ops (AdamW, SGD, scale, the bf16 conversions, all_finite) already give the
// CUDA kernels' bits, with the sums taken in the CUDA order (cuda_order_reductions.hpp). So an
// update of offloaded optimizer state runs on the host's cores, not across the bus, and changes no
// bit of the training run.
#include <memory>

#include "strata/ops.hpp"

namespace strata::cpu {

std::unique_ptr<Ops> make_cpu_ops_in_cuda_order();

}  // namespace strata::cpu
