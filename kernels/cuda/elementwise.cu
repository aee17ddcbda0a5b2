// Elementwise kernels for optimizers, in the grid-stride shape of grid_stride.cuh. The _rn
// intrinsics round each operation once, to nearest, and keep nvcc from contracting a product and a
// sum into one fused multiply-add, so results are the CPU backend's bits.
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/grid_stride.cuh"

namespace strata::cuda {

namespace {

__global__ void sign_kernel(float* out, const float* x, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float v = x[i];
    out[i] = v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : (v == 0.0f ? 0.0f : v));  // NaN passes through
  }
}

__global__ void mul_kernel(float* out, const float* a, const float* b, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) out[i] = __fmul_rn(a[i], b[i]);
}

__global__ void div_kernel(float* out, const float* a, const float* b, float eps, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) out[i] = __fdiv_rn(a[i], __fadd_rn(b[i], eps));
}

__global__ void sqrt_kernel(float* out, const float* x, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) out[i] = __fsqrt_rn(x[i]);
}

}  // namespace

void sign(cudaStream_t stream, float* out, const float* x, std::int64_t count) {
  if (count <= 0) return;
  sign_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, x, count);
}

void mul(cudaStream_t stream, float* out, const float* a, const float* b, std::int64_t count) {
  if (count <= 0) return;
  mul_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, a, b, count);
}

void div(cudaStream_t stream, float* out, const float* a, const float* b, float eps, std::int64_t count) {
  if (count <= 0) return;
  div_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, a, b, eps, count);
}

void sqrt(cudaStream_t stream, float* out, const float* x, std::int64_t count) {
  if (count <= 0) return;
  sqrt_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, x, count);
}

}  // namespace strata::cuda
