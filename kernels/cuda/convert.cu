// Conversion kernels, bitwise the CPU backend's: integer bit manipulation only (the same as
// strata::f32_to_bf16 / bf16_to_f32). They are pure bandwidth (a step of GPT-2 124M at B16 T1024
// in bf16 converts about 40 GB), so where both pointers are 16-byte aligned each thread moves
// eight elements per iteration with 16-byte loads and stores (one uint4 of bf16, two float4 of
// f32); the last count % 8 elements, and unaligned calls, take the one-element loop. The element
// function is the same on either path, so the path changes no bit.
#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/grid_stride.cuh"

#include <cstdint>

namespace strata::cuda {

namespace {

constexpr int kVector = 8;  // elements per 16-byte bf16 access

__device__ std::uint16_t to_bf16(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // NaN, quiet
  const std::uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding_bias) >> 16);
}

__device__ float to_f32(std::uint16_t value) {
  return __uint_as_float(static_cast<std::uint32_t>(value) << 16);
}

// Two bf16 in one 32-bit word, the lower address in the low half (little-endian, as memory holds them).
__device__ std::uint32_t pack(float low, float high) {
  return static_cast<std::uint32_t>(to_bf16(low)) | (static_cast<std::uint32_t>(to_bf16(high)) << 16);
}
__device__ float low_half(std::uint32_t word) {
  return to_f32(static_cast<std::uint16_t>(word & 0xffffu));
}
__device__ float high_half(std::uint32_t word) {
  return to_f32(static_cast<std::uint16_t>(word >> 16));
}

__device__ uint4 narrow8(float4 a, float4 b) {
  return make_uint4(pack(a.x, a.y), pack(a.z, a.w), pack(b.x, b.y), pack(b.z, b.w));
}
__device__ void widen8(uint4 packed, float4& a, float4& b) {
  a = make_float4(low_half(packed.x), high_half(packed.x), low_half(packed.y), high_half(packed.y));
  b = make_float4(low_half(packed.z), high_half(packed.z), low_half(packed.w), high_half(packed.w));
}

// Elements [first, count), one at a time.
__global__ void widen_kernel(float* out, const std::uint16_t* in, std::int64_t first, std::int64_t count) {
  for (std::int64_t i = first + first_index(); i < count; i += index_stride()) out[i] = to_f32(in[i]);
}

__global__ void narrow_kernel(std::uint16_t* out, const float* in, std::int64_t first, std::int64_t count) {
  for (std::int64_t i = first + first_index(); i < count; i += index_stride()) out[i] = to_bf16(in[i]);
}

__global__ void narrow_and_round_kernel(std::uint16_t* out, float* in, std::int64_t first, std::int64_t count) {
  for (std::int64_t i = first + first_index(); i < count; i += index_stride()) {
    const std::uint16_t stored = to_bf16(in[i]);
    out[i] = stored;
    in[i] = to_f32(stored);
  }
}

// `vectors` groups of eight elements, 16-byte aligned.
__global__ void widen8_kernel(float4* out, const uint4* in, std::int64_t vectors) {
  for (std::int64_t v = first_index(); v < vectors; v += index_stride()) {
    float4 a, b;
    widen8(in[v], a, b);
    out[2 * v] = a;
    out[2 * v + 1] = b;
  }
}

__global__ void narrow8_kernel(uint4* out, const float4* in, std::int64_t vectors) {
  for (std::int64_t v = first_index(); v < vectors; v += index_stride()) out[v] = narrow8(in[2 * v], in[2 * v + 1]);
}

__global__ void narrow_and_round8_kernel(uint4* out, float4* in, std::int64_t vectors) {
  for (std::int64_t v = first_index(); v < vectors; v += index_stride()) {
    const uint4 stored = narrow8(in[2 * v], in[2 * v + 1]);
    out[v] = stored;
    widen8(stored, in[2 * v], in[2 * v + 1]);
  }
}

bool aligned16(const void* a, const void* b) {
  return reinterpret_cast<std::uintptr_t>(a) % 16 == 0 && reinterpret_cast<std::uintptr_t>(b) % 16 == 0;
}

// The elements the eight-wide kernel covers: none unless both pointers are 16-byte aligned.
std::int64_t vector_elements(const void* out, const void* in, std::int64_t count) {
  return aligned16(out, in) ? count / kVector * kVector : 0;
}

}  // namespace

void widen(cudaStream_t stream, float* out, const std::uint16_t* in, std::int64_t count) {
  if (count <= 0) return;
  const std::int64_t vectorized = vector_elements(out, in, count);
  if (vectorized > 0)
    widen8_kernel<<<grid_stride_blocks(vectorized / kVector), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), reinterpret_cast<const uint4*>(in), vectorized / kVector);
  if (vectorized < count)
    widen_kernel<<<grid_stride_blocks(count - vectorized), kThreads, 0, stream>>>(out, in, vectorized, count);
}

void narrow(cudaStream_t stream, std::uint16_t* out, const float* in, std::int64_t count) {
  if (count <= 0) return;
  const std::int64_t vectorized = vector_elements(out, in, count);
  if (vectorized > 0)
    narrow8_kernel<<<grid_stride_blocks(vectorized / kVector), kThreads, 0, stream>>>(
        reinterpret_cast<uint4*>(out), reinterpret_cast<const float4*>(in), vectorized / kVector);
  if (vectorized < count)
    narrow_kernel<<<grid_stride_blocks(count - vectorized), kThreads, 0, stream>>>(out, in, vectorized, count);
}

void narrow_and_round(cudaStream_t stream, std::uint16_t* out, float* in, std::int64_t count) {
  if (count <= 0) return;
  const std::int64_t vectorized = vector_elements(out, in, count);
  if (vectorized > 0)
    narrow_and_round8_kernel<<<grid_stride_blocks(vectorized / kVector), kThreads, 0, stream>>>(
        reinterpret_cast<uint4*>(out), reinterpret_cast<float4*>(in), vectorized / kVector);
  if (vectorized < count)
    narrow_and_round_kernel<<<grid_stride_blocks(count - vectorized), kThreads, 0, stream>>>(out, in, vectorized,
                                                                                             count);
}

}  // namespace strata::cuda
