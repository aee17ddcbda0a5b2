#pragma once
// Int8 weight storage on the CUDA backend's stream: quantization bit for bit the CPU's
// (cpu/int8_weights_cpu.hpp: the same groups, scale = absmax / 127, q = clamp(rint(x / scale), -127,
// 127), a NaN scale for a group holding an infinity or a NaN), and dequantization into bf16
// (float(q) * scale, rounded to nearest even), the operand the backend's bf16 tensor-core matmul
// takes. Built with -fmad=false and IEEE division, so the CPU's bits come out. Pointers are device
// memory or pinned host memory the device maps (an offloaded master); the functions only launch
// (the caller checks cudaGetLastError).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cpu/int8_weights_cpu.hpp"

namespace strata::int8::cuda {

void quantize(cudaStream_t stream, Int8Matrix out, const float* master, std::int64_t in_features,
              std::int64_t out_features, WeightLayout layout);

// The whole matrix as bf16 bit patterns, in the stored layout.
void dequantize_bf16(cudaStream_t stream, std::uint16_t* out, ConstInt8Matrix in, std::int64_t in_features,
                     std::int64_t out_features, WeightLayout layout);

}  // namespace strata::int8::cuda
