#pragma once
// SGD's update on the CUDA backend's compute stream, bit for bit the host loop's (cpu/sgd_cpu.hpp;
// built with -fmad=false).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "strata/op_records.hpp"

namespace strata::sgd::cuda {

// Launches on `stream`; the caller checks cudaGetLastError. velocity may be null without momentum.
void update(cudaStream_t stream, float* param, const float* grad, float* velocity, std::int64_t count,
            const SgdHyper& hyper);

}  // namespace strata::sgd::cuda
