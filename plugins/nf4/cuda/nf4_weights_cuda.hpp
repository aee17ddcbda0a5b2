#pragma once
// NF4 weight storage on the CUDA backend's stream: quantization bit for bit the CPU's
// (cpu/nf4_weights_cpu.hpp: the same blocks, levels, nearest-index comparisons, the absmax mean
// summed in double in the same order, the same 8-bit map), and dequantization into bf16
// (level * dequantized absmax, rounded to nearest even), the operand the backend's bf16 tensor-core
// matmul takes. Built with -fmad=false and IEEE division, so the CPU's bits come out. Pointers are
// device memory or pinned host memory the device maps; the functions only launch (the caller
// checks cudaGetLastError).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cpu/nf4_weights_cpu.hpp"

namespace strata::nf4::cuda {

// Device scratch quantize() needs, in floats: the exact absmax and the partial sums of their mean.
std::int64_t quantize_scratch_floats(std::int64_t elements, Nf4Format format);

void quantize(cudaStream_t stream, Nf4Matrix out, const float* master, std::int64_t elements, float* scratch);

// The whole matrix as bf16 bit patterns, in the stored layout.
void dequantize_bf16(cudaStream_t stream, std::uint16_t* out, ConstNf4Matrix in, std::int64_t elements);

}  // namespace strata::nf4::cuda
