#pragma once
// LoRA's dropout mask, one text for the host loop (lora_adapter.cpp) and the CUDA kernel
// (cuda/lora_dropout_cuda.cu): element i of a pass's input is kept when a hash of (micro batch
// sequence, matrix index, i) is at least p, and a kept value is scaled by 1 / (1 - p). Each is one
// rounded multiply (and, accumulating, one add): both devices give the same bits where no
// contraction fuses them (the CUDA file builds with -fmad=false).
#include <cstdint>

#include "strata/counter_random.hpp"

namespace strata::lora {

// The hash stream of one (micro batch, matrix) pair.
STRATA_HOST_DEVICE constexpr std::uint64_t dropout_stream(std::uint64_t sequence, int matrix_index) noexcept {
  return splitmix64(splitmix64(sequence) ^ (static_cast<std::uint64_t>(matrix_index) << 32));
}

// Uniform in [0, 1) from the top 24 bits: exact in a float.
STRATA_HOST_DEVICE constexpr float unit_from_bits(std::uint64_t bits) noexcept {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// x ⊙ mask / (1 - p) for element i, with keep_scale = 1 / (1 - p).
STRATA_HOST_DEVICE constexpr float dropped(float x, std::uint64_t stream, std::int64_t i, float p,
                                           float keep_scale) noexcept {
  return unit_from_bits(splitmix64(stream + static_cast<std::uint64_t>(i))) >= p ? x * keep_scale : 0.0f;
}

// One application: into = dropped(x) (forward), or into += dropped(x) (backward), over count floats.
struct DropoutCall {
  float* into;
  const float* x;
  std::int64_t count;
  std::uint64_t stream;
  float p;
  float keep_scale;
  bool accumulate;
};

}  // namespace strata::lora
