#pragma once
// The CUDA backend's baseline causal attention: cuBLAS strided-batched products around a softmax
// kernel, with the semantics of kernels/cpu/attention.hpp. q is (N, n_head, D) and k, v are
// (N, n_kv_head, D), rows `stride` floats apart; query head h reads key/value head
// h / (n_head / n_kv_head); out is (N, n_head * D) contiguous; scale is 1/sqrt(D).
//
// `saved` holds the softmax probabilities P (B, n_head, T, T), zero above the diagonal. Backward
// adds into dq, dk, dv and works one batch row at a time, so `scratch` is one (n_head, T, T) slice
// for dP and then dS. The caller has bound `cublas` to `stream` and given it a fixed workspace, so
// every product is deterministic; its math mode decides f32 or TF32 products (`[device] tf32`).
// If a cuBLAS call fails, the function returns its status at once without launching the rest.
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "strata/ops.hpp"

namespace strata::cuda {

std::int64_t attention_saved_floats(const AttentionShape& shape);
std::int64_t attention_scratch_floats(const AttentionShape& shape);

cublasStatus_t attention_forward(cudaStream_t stream, cublasHandle_t cublas, const AttentionShape& shape, float* out,
                                 float* saved, const AttentionInputs& in);
cublasStatus_t attention_backward(cudaStream_t stream, cublasHandle_t cublas, const AttentionShape& shape,
                                  const AttentionGrads& grads, const float* dout, const AttentionInputs& in,
                                  const float* saved, float* scratch);

}  // namespace strata::cuda
