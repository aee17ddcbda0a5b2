#pragma once
// Conversions between f32 and bf16 (raw std::uint16_t bits) on the device, bit for bit as
// strata/dtype.hpp defines them: narrowing rounds to nearest, ties to even, and keeps NaN quiet.
// narrow_and_round also writes the rounded values back into the f32 source.
#include <cstdint>

#include <cuda_runtime_api.h>

namespace strata::cuda {

void widen(cudaStream_t stream, float* out, const std::uint16_t* in, std::int64_t count);
void narrow(cudaStream_t stream, std::uint16_t* out, const float* in, std::int64_t count);
void narrow_and_round(cudaStream_t stream, std::uint16_t* out, float* in, std::int64_t count);

}  // namespace strata::cuda
