#pragma once
// Matmuls on cuBLAS. Row-major (N, in) x (in, out) products are issued as column-major products of
// the transposed matrices, so no operand is ever copied to change its layout. f32 weights run in
// true f32 unless the backend was asked for TF32 products (`[device] tf32`); bf16 weights run on the tensor
// cores with bf16 operands and f32 accumulation, the input (and, backward, dout) narrowed to bf16
// in a workspace first, the bias added in cuBLASLt's epilogue where the caller gives one. Deterministic: cuBLAS picks
// the same algorithm for the same shape, handle and workspace, and dbias is a gemv with a ones vector, not an atomic
// column sum.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/bias_matmul.hpp"
#include "strata/ops.hpp"

namespace strata::cuda {

// bf16 staging the bf16 path needs: the narrowed input forward; input and dout backward.
std::size_t matmul_bf16_workspace_bytes(const MatmulShape& shape);

// Each returns the first cuBLAS status that is not CUBLAS_STATUS_SUCCESS (launch errors are the
// caller's to read with cudaGetLastError).
// tf32: f32 operands run on TF32 tensor cores (bf16 operands are unaffected). epilogue: where given,
// a bf16 product adds its bias in cuBLASLt's epilogue (bias_matmul.hpp) when cuBLASLt can.
cublasStatus_t matmul_forward(cudaStream_t stream, cublasHandle_t handle, float* out, const float* inp, Weight weight,
                              const float* bias, const MatmulShape& shape, void* workspace, bool tf32,
                              BiasEpilogue epilogue = {});
// The same products on an input already in bf16 (bf16 weights only): the same bits as the calls
// above on that input widened, without the narrowing. Backward still narrows dout into `workspace`.
cublasStatus_t matmul_forward_bf16_input(cudaStream_t stream, cublasHandle_t handle, float* out,
                                         const std::uint16_t* inp, Weight weight, const float* bias,
                                         const MatmulShape& shape, BiasEpilogue epilogue = {});
cublasStatus_t matmul_backward_bf16_input(cudaStream_t stream, cublasHandle_t handle, float* dinp, float* dweight,
                                          float* dbias, const float* dout, const std::uint16_t* inp, Weight weight,
                                          const MatmulShape& shape, GradientWrite dinp_write, const float* ones,
                                          void* workspace);
// dinp per dinp_write; dweight and dbias (either may be null) accumulate. `ones` holds at least
// shape.rows ones (f32) for the dbias gemv.
cublasStatus_t matmul_backward(cudaStream_t stream, cublasHandle_t handle, float* dinp, float* dweight, float* dbias,
                               const float* dout, const float* inp, Weight weight, const MatmulShape& shape,
                               GradientWrite dinp_write, const float* ones, void* workspace, bool tf32);

// out[i] = value for count floats (the ones vector).
void fill_floats(cudaStream_t stream, float* out, float value, std::int64_t count);

}  // namespace strata::cuda
