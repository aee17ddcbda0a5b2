#include "kernels/cpu/adamw.hpp"

#include "strata/kernels_common.hpp"

namespace strata::cpu {

void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count, const AdamWHyper& hyper) {
  const kernels::AdamWCoefficients c = kernels::adamw_coefficients(hyper);
  // Element-wise and branch-free, so the compiler emits packed FMA (AVX2/AVX-512 under -march=native);
  // one pass over the four streams, split statically across threads, each with its own copy of c.
#pragma omp parallel for simd schedule(static) firstprivate(c)
  for (std::int64_t i = 0; i < count; ++i) kernels::adamw_element(param[i], grad[i], m[i], v[i], c);
}

}  // namespace strata::cpu
