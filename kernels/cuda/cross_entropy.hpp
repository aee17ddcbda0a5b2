#pragma once
// Softmax cross-entropy over vocabulary chunks on the GPU, with the semantics of
// kernels/cpu/cross_entropy.hpp: `logits` holds columns [first, first + width) of every row, rows
// `width` apart; columns >= vocab are padding. Forward keeps a running max, a running sum of
// exponentials (rescaled when the max grows) and the target's logit per row; the chunk with
// first == 0 starts them, chunks come in order of first. Finish writes loss and log-sum-exp
// (running_max may alias logsumexp, running_sum may alias losses). Backward writes the chunk's
// dlogits = (softmax - onehot) * dloss, zero in the padding; dlogits may alias logits. A negative
// target: loss 0, dlogits 0.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::cuda {

void cross_entropy_forward_chunk(cudaStream_t stream, float* running_max, float* running_sum, float* target_logits,
                                 const float* logits, const std::int32_t* targets, std::int64_t rows,
                                 std::int64_t first, std::int64_t width, std::int64_t vocab);
void cross_entropy_finish(cudaStream_t stream, float* losses, float* logsumexp, const float* running_max,
                          const float* running_sum, const float* target_logits, const std::int32_t* targets,
                          std::int64_t rows);
void cross_entropy_backward_chunk(cudaStream_t stream, float* dlogits, const float* logits, const float* logsumexp,
                                  const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                  std::int64_t width, std::int64_t vocab);

}  // namespace strata::cuda
