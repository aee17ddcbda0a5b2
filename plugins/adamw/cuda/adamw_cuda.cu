#include "cuda/adamw_cuda.hpp"
#include "strata/plugin_support/adamw_update_cuda.cuh"

namespace strata::adamw::cuda {

void update(cudaStream_t stream, float* param, const float* grad, float* m, float* v, std::int64_t count,
            const AdamWHyper& hyper) {
  plugin_support::adamw_update_f32_cuda(stream, param, grad, m, v, count, hyper);
}

}  // namespace strata::adamw::cuda
