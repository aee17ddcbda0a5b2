#pragma once
// AdamW's f32 update over one tensor on the host's cores (AdamWHyper's formula, strata/op_records.hpp):
// chunks of the four streams split statically across threads, each chunk compiled per instruction
// set (strata/cpu_clones.hpp) around the element CUDA kernels run too (adamw_element,
// strata/kernels_common.hpp). Build the translation unit that calls it with -ffp-contract=off: every
// operation of the element is then correctly rounded, so each clone, the CUDA kernel
// (adamw_update_cuda.cuh) and any other library that compiles this text give the same bits. The
// functions have internal linkage: each library compiles its own copy with its own flags.
#include <algorithm>
#include <cstdint>

#include "strata/cpu_clones.hpp"
#include "strata/kernels_common.hpp"

namespace strata::plugin_support {

[[maybe_unused]] STRATA_CPU_CLONES static void adamw_update_chunk(float* param, const float* grad, float* m, float* v,
                                                                  std::int64_t count,
                                                                  const kernels::AdamWCoefficients& coefficients) {
  const kernels::AdamWCoefficients c = coefficients;  // a local copy: not reloaded at every element
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) kernels::adamw_element(param[i], grad[i], m[i], v[i], c);
}

// param, grad, m and v are host memory of `count` floats; no two alias.
[[maybe_unused]] static void adamw_update_f32(float* param, const float* grad, float* m, float* v, std::int64_t count,
                                              const AdamWHyper& hyper) {
  const kernels::AdamWCoefficients c = kernels::adamw_coefficients(hyper);
  constexpr std::int64_t kChunk = 1 << 14;
  const std::int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kChunk;
    adamw_update_chunk(param + begin, grad + begin, m + begin, v + begin, std::min(kChunk, count - begin), c);
  }
}

}  // namespace strata::plugin_support
