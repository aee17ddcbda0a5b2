#pragma once
// The CPU backend's op table: today's kernels (OpenBLAS GEMMs, OpenMP loops) behind strata::Ops.
#include <memory>

#include "strata/ops.hpp"

namespace strata::cpu {

std::unique_ptr<Ops> make_cpu_ops();

}  // namespace strata::cpu
