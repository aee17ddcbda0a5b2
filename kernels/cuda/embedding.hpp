#pragma once
// Token + position embedding on the device. tokens are (batch, seq_len) int32; wte is (vocab,
// channels); wpe is (max_seq_len, channels) or null (positions come from RoPE); out is (batch,
// seq_len, channels): scale * wte[token] + wpe[position], the position t or positions[n] when given
// (packed documents). Backward adds scale * dout into dwte and dout into dwpe (null: no position
// table). dwte's rows are
// summed without atomics: the positions are sorted by token in `workspace`
// (embedding_backward_workspace_bytes of device memory), then each token's rows are added in
// position order.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::cuda {

void embedding_forward(cudaStream_t stream, float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions,
                       float scale);
// The same with both tables stored as bf16 (raw bits); the sum is taken in f32.
void embedding_forward_bf16(cudaStream_t stream, float* out, const std::int32_t* tokens, const std::uint16_t* wte,
                            const std::uint16_t* wpe, std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                            const std::int32_t* positions, float scale);

std::size_t embedding_backward_workspace_bytes(std::int64_t batch, std::int64_t seq_len);

void embedding_backward(cudaStream_t stream, float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                        std::int64_t batch, std::int64_t seq_len, std::int64_t channels, const std::int32_t* positions,
                        float scale, void* workspace, std::size_t workspace_bytes);

}  // namespace strata::cuda
