#include "kernels/cpu/adamw.hpp"

#include <algorithm>

#include "strata/cpu_clones.hpp"
#include "strata/kernels_common.hpp"

namespace strata::cpu {

namespace {

// One chunk, compiled per instruction set (strata/cpu_clones.hpp). This file is built without
// contraction into FMA (kernels/CMakeLists.txt), and every operation of the element is correctly
// rounded, so each clone gives the same bits, and so does the CUDA kernel (the host updates
// offloaded state for a CUDA run with it: cuda_order_ops.hpp).
STRATA_CPU_CLONES void update_chunk(float* param, const float* grad, float* m, float* v, std::int64_t count,
                                    const kernels::AdamWCoefficients& coefficients) {
  const kernels::AdamWCoefficients c = coefficients;  // a local copy: not reloaded at every element
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) kernels::adamw_element(param[i], grad[i], m[i], v[i], c);
}

}  // namespace

void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count, const AdamWHyper& hyper) {
  const kernels::AdamWCoefficients c = kernels::adamw_coefficients(hyper);
  // One pass over the four streams, in chunks split statically across threads.
  constexpr std::int64_t kChunk = 1 << 14;
  const std::int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kChunk;
    const std::int64_t length = std::min(kChunk, count - begin);
    update_chunk(param + begin, grad + begin, m + begin, v + begin, length, c);
  }
}

}  // namespace strata::cpu
