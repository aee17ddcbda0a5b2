#pragma once
// LoRA's dropout mask on the CUDA backend's stream (dropout_mask.hpp): grid-stride, one element
// per step, bit for bit the host loop's. Pointers are device memory; the function only launches
// (the caller checks cudaGetLastError).
#include <cuda_runtime_api.h>

#include "dropout_mask.hpp"

namespace strata::lora::cuda {

void apply_dropout(cudaStream_t stream, const DropoutCall& call);

}  // namespace strata::lora::cuda
