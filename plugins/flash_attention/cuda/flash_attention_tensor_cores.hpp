#pragma once
// The flash plugin's tensor-core kernels (`[kernels] attention = "flash_bf16"`): the algorithm of
// flash_attention_cuda.cu, with every product on the tensor cores (mma.sync m16n8k16, bf16
// operands, f32 accumulation, sm_80 and later). Q, K, V and dout are rounded to bf16: forward as
// each tile is loaded, backward once, into copies that its tile loads read. The softmax, its row
// statistics, the probabilities' sums and every accumulator stay f32, and P and dS are rounded to
// bf16 only as operands of the next product. Deterministic bit for bit, like the f32 kernels: no
// atomics, fixed launch shapes and sum orders. Called through flash_attention_cuda.hpp's forward()
// and backward() with Operands::bf16.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "strata/ops.hpp"

namespace strata::flash::cuda::tensor_cores {

// Dynamic shared memory per block of the largest of the three kernels, for head dim 64 or 128.
int shared_bytes(int head_dim);

// Launch only; the caller has checked the shape (head dim 64 or 128, a whole number of kv groups)
// and computed `delta` (rowsum(dout ⊙ out), (B, n_head, T)) before backward.
void launch_forward(cudaStream_t stream, const AttentionShape& shape, float* out, float* lse,
                    const AttentionInputs& in);
// `copies` (tensor_core_scratch.hpp) receives the bf16 copies of q, k, v and dout first.
void launch_backward(cudaStream_t stream, const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                     const AttentionInputs& in, const float* lse, const float* delta, float* copies);

}  // namespace strata::flash::cuda::tensor_cores
