#include "cuda/lora_dropout_cuda.hpp"

namespace strata::lora::cuda {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65536;

__global__ void dropout_kernel(const DropoutCall call) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < call.count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float value = dropped(call.x[i], call.stream, i, call.p, call.keep_scale);
    call.into[i] = call.accumulate ? call.into[i] + value : value;
  }
}

}  // namespace

void apply_dropout(cudaStream_t stream, const DropoutCall& call) {
  if (call.count <= 0) return;
  const std::int64_t blocks = (call.count + kThreads - 1) / kThreads;
  dropout_kernel<<<static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks), kThreads, 0, stream>>>(call);
}

}  // namespace strata::lora::cuda
