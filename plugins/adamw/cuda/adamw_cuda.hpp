#pragma once
// AdamW's update on the CUDA backend's compute stream, bit for bit the host loop's
// (cpu/adamw_cpu.hpp): strata/plugin_support/adamw_update_cuda.cuh, built with -fmad=false.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "strata/op_records.hpp"

namespace strata::adamw::cuda {

// Launches on `stream`; the caller checks cudaGetLastError.
void update(cudaStream_t stream, float* param, const float* grad, float* m, float* v, std::int64_t count,
            const AdamWHyper& hyper);

}  // namespace strata::adamw::cuda
