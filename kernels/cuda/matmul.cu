// Matmuls on cuBLAS (see matmul.hpp). A row-major (r, c) matrix is a column-major (c, r) one with
// leading dimension c, so each row-major product below is written as the column-major product of
// the transposes: out^T = W^T-ish x inp^T. Each call's row-major meaning is in its comment.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/matmul.hpp"

namespace strata::cuda {

namespace {

__global__ void broadcast_rows_kernel(float* out, const float* row, std::int64_t rows, std::int64_t columns) {
  const std::int64_t count = rows * columns;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = row[i % columns];
}

__global__ void fill_floats_kernel(float* out, float value, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = value;
}

int as_int(std::int64_t value) {
  return static_cast<int>(value);
}

struct Operand {
  const void* data;
  cudaDataType_t type;
};

// C (m, n), column-major, = alpha * op(A) op(B) + beta * C, accumulated in f32; f32 operands are
// true f32 unless tf32 puts them on the TF32 tensor cores.
cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b, std::int64_t m,
                    std::int64_t n, std::int64_t k, Operand a, std::int64_t lda, Operand b, std::int64_t ldb,
                    float beta, float* c, std::int64_t ldc, bool tf32) {
  const float alpha = 1.0f;
  const cublasComputeType_t compute = tf32 && a.type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  return cublasGemmEx(handle, op_a, op_b, as_int(m), as_int(n), as_int(k), &alpha, a.data, a.type, as_int(lda), b.data,
                      b.type, as_int(ldb), &beta, c, CUDA_R_32F, as_int(ldc), compute, CUBLAS_GEMM_DEFAULT);
}

Operand weight_operand(Weight weight) {
  return {weight.data, weight.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F};
}

}  // namespace

std::size_t matmul_bf16_workspace_bytes(const MatmulShape& shape) {
  const std::int64_t widest = shape.in_features > shape.out_features ? shape.in_features : shape.out_features;
  return static_cast<std::size_t>(shape.rows) * static_cast<std::size_t>(shape.in_features + widest) * 2;
}

void fill_floats(cudaStream_t stream, float* out, float value, std::int64_t count) {
  if (count > 0) fill_floats_kernel<<<grid_stride_blocks(count), kThreads, 0, stream>>>(out, value, count);
}

namespace {

// out = input @ W (+ bias), the input already in the operand type the weight's products take.
cublasStatus_t forward_product(cudaStream_t stream, cublasHandle_t handle, float* out, Operand input, Weight weight,
                               const float* bias, const MatmulShape& shape, bool tf32, BiasEpilogue epilogue) {
  const std::int64_t N = shape.rows, C = shape.in_features, OC = shape.out_features;
  if (input.type == CUDA_R_16BF && bias != nullptr && epilogue.matmul != nullptr) {
    const cublasStatus_t status =
        epilogue.matmul->forward(stream, out, static_cast<const std::uint16_t*>(input.data), weight.data, bias, shape,
                                 epilogue.workspace, epilogue.workspace_bytes);
    if (status != CUBLAS_STATUS_NOT_SUPPORTED) return status;
  }
  if (bias != nullptr) broadcast_rows_kernel<<<grid_stride_blocks(N * OC), kThreads, 0, stream>>>(out, bias, N, OC);
  const float beta = bias != nullptr ? 1.0f : 0.0f;
  // Row-major out (N, OC) = inp (N, C) @ W, with W (C, OC) [in_out] or W^T for W (OC, C) [out_in].
  if (shape.layout == WeightLayout::in_out)
    return gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C, weight_operand(weight), OC, input, C, beta, out, OC, tf32);
  return gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight_operand(weight), C, input, C, beta, out, OC, tf32);
}

// dinp, dweight and dbias from dout and the input, both already in the weight's operand type;
// dout_f32 is dout itself (f32), which the dbias gemv reads.
cublasStatus_t backward_products(cublasHandle_t handle, float* dinp, float* dweight, float* dbias, Operand gradient,
                                 const float* dout_f32, Operand input, Weight weight, const MatmulShape& shape,
                                 GradientWrite dinp_write, const float* ones, bool tf32) {
  const std::int64_t N = shape.rows, C = shape.in_features, OC = shape.out_features;
  const bool in_out = shape.layout == WeightLayout::in_out;
  if (dinp != nullptr) {
    const float beta = dinp_write == GradientWrite::accumulate ? 1.0f : 0.0f;
    // Row-major dinp (N, C) = dout (N, OC) @ W^T for W (C, OC) [in_out], dout @ W for W (OC, C) [out_in].
    const cublasStatus_t status = in_out ? gemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, C, N, OC, weight_operand(weight), OC,
                                                gradient, OC, beta, dinp, C, tf32)
                                         : gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight_operand(weight), C,
                                                gradient, OC, beta, dinp, C, tf32);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  if (dweight != nullptr) {
    // Row-major dW (C, OC) += inp^T (C, N) @ dout (N, OC) [in_out]; dW (OC, C) += dout^T @ inp [out_in].
    const cublasStatus_t status =
        in_out ? gemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, OC, C, N, gradient, OC, input, C, 1.0f, dweight, OC, tf32)
               : gemm(handle, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, input, C, gradient, OC, 1.0f, dweight, C, tf32);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  if (dbias != nullptr) {
    // dbias (OC) += dout^T (OC, N) @ ones (N): column-major dout is (OC, N) with leading dimension OC.
    const float alpha = 1.0f, beta = 1.0f;
    return cublasSgemv(handle, CUBLAS_OP_N, as_int(OC), as_int(N), &alpha, dout_f32, as_int(OC), ones, 1, &beta, dbias,
                       1);
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t matmul_forward(cudaStream_t stream, cublasHandle_t handle, float* out, const float* inp, Weight weight,
                              const float* bias, const MatmulShape& shape, void* workspace, bool tf32,
                              BiasEpilogue epilogue) {
  if (shape.rows == 0 || shape.out_features == 0) return CUBLAS_STATUS_SUCCESS;
  Operand input{inp, CUDA_R_32F};
  if (weight.dtype == DType::bf16) {  // the tensor cores take both operands in bf16
    auto* narrowed = static_cast<std::uint16_t*>(workspace);
    narrow(stream, narrowed, inp, shape.rows * shape.in_features);
    input = {narrowed, CUDA_R_16BF};
  }
  return forward_product(stream, handle, out, input, weight, bias, shape, tf32, epilogue);
}

cublasStatus_t matmul_forward_bf16_input(cudaStream_t stream, cublasHandle_t handle, float* out,
                                         const std::uint16_t* inp, Weight weight, const float* bias,
                                         const MatmulShape& shape, BiasEpilogue epilogue) {
  if (weight.dtype != DType::bf16) return CUBLAS_STATUS_INVALID_VALUE;  // the ops' contract: bf16 weights
  if (shape.rows == 0 || shape.out_features == 0) return CUBLAS_STATUS_SUCCESS;
  return forward_product(stream, handle, out, {inp, CUDA_R_16BF}, weight, bias, shape, false, epilogue);
}

cublasStatus_t matmul_backward(cudaStream_t stream, cublasHandle_t handle, float* dinp, float* dweight, float* dbias,
                               const float* dout, const float* inp, Weight weight, const MatmulShape& shape,
                               GradientWrite dinp_write, const float* ones, void* workspace, bool tf32) {
  const std::int64_t N = shape.rows, C = shape.in_features, OC = shape.out_features;
  if (N == 0) return CUBLAS_STATUS_SUCCESS;
  Operand input{inp, CUDA_R_32F}, gradient{dout, CUDA_R_32F};
  if (weight.dtype == DType::bf16) {
    auto* narrowed_input = static_cast<std::uint16_t*>(workspace);
    auto* narrowed_gradient = narrowed_input + N * C;
    narrow(stream, narrowed_input, inp, N * C);
    narrow(stream, narrowed_gradient, dout, N * OC);
    input = {narrowed_input, CUDA_R_16BF};
    gradient = {narrowed_gradient, CUDA_R_16BF};
  }
  return backward_products(handle, dinp, dweight, dbias, gradient, dout, input, weight, shape, dinp_write, ones, tf32);
}

cublasStatus_t matmul_backward_bf16_input(cudaStream_t stream, cublasHandle_t handle, float* dinp, float* dweight,
                                          float* dbias, const float* dout, const std::uint16_t* inp, Weight weight,
                                          const MatmulShape& shape, GradientWrite dinp_write, const float* ones,
                                          void* workspace) {
  if (weight.dtype != DType::bf16) return CUBLAS_STATUS_INVALID_VALUE;
  const std::int64_t N = shape.rows, OC = shape.out_features;
  if (N == 0) return CUBLAS_STATUS_SUCCESS;
  auto* narrowed_gradient = static_cast<std::uint16_t*>(workspace);
  narrow(stream, narrowed_gradient, dout, N * OC);
  return backward_products(handle, dinp, dweight, dbias, {narrowed_gradient, CUDA_R_16BF}, dout, {inp, CUDA_R_16BF},
                           weight, shape, dinp_write, ones, false);
}

}  // namespace strata::cuda
