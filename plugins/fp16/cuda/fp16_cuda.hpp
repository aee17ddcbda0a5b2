#pragma once
// fp16 precision on the CUDA backend's stream: the conversions its matmuls need, on the device.
// Finite values and infinities convert bit for bit as on the CPU (cpu/fp16_matmul_cpu.hpp: round to
// nearest even, past 65504 to an infinity, binary16 subnormals kept); a NaN stays a NaN, though its
// payload bits may differ from the CPU's. The matmuls then run on the backend's f32 product with
// operands that binary16 (or bf16) holds exactly, which TF32 holds exactly too: the products are
// f16 tensor cores' up to summation order, with or without `[device] tf32`. Pointers are device
// memory or pinned host memory the device maps; the functions only launch (the caller checks
// cudaGetLastError).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cpu/fp16_matmul_cpu.hpp"

namespace strata::fp16::cuda {

void narrow(cudaStream_t stream, std::uint16_t* out, const float* in, std::int64_t count);
void widen(cudaStream_t stream, float* out, const std::uint16_t* in, std::int64_t count);
// out = in rounded to binary16 (Operands::f16) or bf16 (Operands::bf16), as f32; a copy for f32.
void round_operand(cudaStream_t stream, float* out, const float* in, std::int64_t count, Operands operands);

}  // namespace strata::fp16::cuda
