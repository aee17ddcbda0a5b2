// Pointwise kernels: kThreads threads per block, grid min(ceil(count / kThreads), kMaxBlocks),
// each thread walks i, i + gridDim.x * kThreads, ... (a grid-stride loop). No reductions.
// Formulas as the CPU backend writes them; the GELU constant sqrt(2 / pi) is computed once on the
// host exactly as the CPU backend computes it and passed in.
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/pointwise.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace strata::cuda {

namespace {

float gelu_scale() {
  return std::sqrt(2.0f / std::numbers::pi_v<float>);
}

__global__ void gelu_forward_kernel(float* out, const float* inp, std::int64_t count, float scale) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(scale * (x + 0.044715f * x * x * x)));
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, std::int64_t count, float scale,
                                     bool accumulate) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float x = inp[i];
    const float tanh_out = tanhf(scale * (x + 0.044715f * x * x * x));
    const float sech2 = 1.0f - tanh_out * tanh_out;
    const float slope = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech2 * scale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = accumulate ? dinp[i] + slope * dout[i] : slope * dout[i];
  }
}

__global__ void swiglu_forward_kernel(float* out, const float* gate, const float* up, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                       std::int64_t count, bool accumulate) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float g = gate[i];
    const float sigmoid = 1.0f / (1.0f + expf(-g));
    const float dgate_i = dout[i] * up[i] * sigmoid * (1.0f + g * (1.0f - sigmoid));
    const float dup_i = dout[i] * g * sigmoid;
    dgate[i] = accumulate ? dgate[i] + dgate_i : dgate_i;
    dup[i] = accumulate ? dup[i] + dup_i : dup_i;
  }
}

__global__ void geglu_forward_kernel(float* out, const float* gate, const float* up, std::int64_t count, float scale) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + tanhf(scale * (x + 0.044715f * x * x * x))) * up[i];
  }
}

__global__ void geglu_backward_kernel(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                      std::int64_t count, float scale, bool accumulate) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) {
    const float x = gate[i];
    const float tanh_out = tanhf(scale * (x + 0.044715f * x * x * x));
    const float sech2 = 1.0f - tanh_out * tanh_out;
    const float slope = 0.5f * (1.0f + tanh_out) + x * 0.5f * sech2 * scale * (1.0f + 3.0f * 0.044715f * x * x);
    const float dgate_i = dout[i] * up[i] * slope;
    const float dup_i = dout[i] * (0.5f * x * (1.0f + tanh_out));
    dgate[i] = accumulate ? dgate[i] + dgate_i : dgate_i;
    dup[i] = accumulate ? dup[i] + dup_i : dup_i;
  }
}

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* values, float factor, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) values[i] *= factor;
}

// fmaf would round once where the CPU rounds twice: the product is rounded first, as there.
__global__ void add_scaled_kernel(float* y, float alpha, const float* x, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += index_stride()) y[i] = __fadd_rn(y[i], __fmul_rn(alpha, x[i]));
}

}  // namespace

void gelu_forward(cudaStream_t stream, float* out, const float* inp, std::int64_t count) {
  if (count <= 0) return;
  gelu_forward_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, inp, count, gelu_scale());
}

void gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout, std::int64_t count,
                   GradientWrite write) {
  if (count <= 0) return;
  gelu_backward_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(dinp, inp, dout, count, gelu_scale(),
                                                                           write == GradientWrite::accumulate);
}

void swiglu_forward(cudaStream_t stream, float* out, const float* gate, const float* up, std::int64_t count) {
  if (count <= 0) return;
  swiglu_forward_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, gate, up, count);
}

void swiglu_backward(cudaStream_t stream, float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, std::int64_t count, GradientWrite write) {
  if (count <= 0) return;
  swiglu_backward_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(dgate, dup, dout, gate, up, count,
                                                                             write == GradientWrite::accumulate);
}

void geglu_forward(cudaStream_t stream, float* out, const float* gate, const float* up, std::int64_t count) {
  if (count <= 0) return;
  geglu_forward_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, gate, up, count, gelu_scale());
}

void geglu_backward(cudaStream_t stream, float* dgate, float* dup, const float* dout, const float* gate,
                    const float* up, std::int64_t count, GradientWrite write) {
  if (count <= 0) return;
  geglu_backward_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(
      dgate, dup, dout, gate, up, count, gelu_scale(), write == GradientWrite::accumulate);
}

void residual_forward(cudaStream_t stream, float* out, const float* a, const float* b, std::int64_t count) {
  if (count <= 0) return;
  residual_forward_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, a, b, count);
}

void scale(cudaStream_t stream, float* values, float factor, std::int64_t count) {
  if (count <= 0) return;
  scale_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(values, factor, count);
}

void add_scaled(cudaStream_t stream, float* y, float alpha, const float* x, std::int64_t count) {
  if (count <= 0) return;
  add_scaled_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(y, alpha, x, count);
}

}  // namespace strata::cuda
