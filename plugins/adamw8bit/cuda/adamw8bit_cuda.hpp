#pragma once
// The 8-bit AdamW update on the CUDA backend's stream, bit for bit the CPU kernel's
// (cpu/adamw8bit_cpu.hpp): one thread block per quantization block dequantizes m and v, runs the
// CPU's own f32 AdamW element (kernels_common.hpp's adamw_element, built with -fmad=false: no
// contraction, IEEE sqrt and division), reduces the block's new absmax (a max: any order gives
// the same bits) and quantizes against it with the CPU's decision thresholds. The maps and thresholds travel as a
// kernel parameter, so the kernel keeps no state and allocates nothing. Block sizes 256 .. 4096.
// All pointers are device memory (or host memory the device maps); the function only launches
// (the caller checks cudaGetLastError).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cpu/dynamic_quantization.hpp"
#include "strata/kernels_common.hpp"

namespace strata::adamw8bit::cuda {

// The two maps (dynamic_quantization.hpp), index 0 the signed one (first moment), 1 the unsigned
// one (second moment): values, decision thresholds (code(x) = how many of thresholds[0..254] are
// below x), and the code of 0.0.
struct QuantizationTables {
  float values[2][256];
  float thresholds[2][256];
  std::uint8_t zero_code[2];
};

// The CPU's maps and thresholds (dynamic_quantization.hpp), as the kernel takes them.
inline QuantizationTables quantization_tables() {
  QuantizationTables tables{};
  const MapKind kinds[2] = {MapKind::signed_dynamic, MapKind::unsigned_dynamic};
  for (int map = 0; map < 2; ++map) {
    const auto values = quantization_map(kinds[map]);
    const auto thresholds = decision_thresholds(kinds[map]);
    for (int i = 0; i < 256; ++i) {
      tables.values[map][i] = values[static_cast<std::size_t>(i)];
      tables.thresholds[map][i] = thresholds[static_cast<std::size_t>(i)];
    }
    tables.zero_code[map] = zero_code(kinds[map]);
  }
  return tables;
}

inline constexpr std::int64_t kMaxBlockSize = 4096;

void adamw8bit_update(cudaStream_t stream, float* param, const float* grad, std::uint8_t* m_codes, float* m_absmax,
                      std::uint8_t* v_codes, float* v_absmax, std::int64_t count, std::int64_t block_size,
                      const kernels::AdamWCoefficients& coefficients, const QuantizationTables& tables);
// A small tensor's update, with f32 moments: AdamW's own kernel (strata/plugin_support/adamw_update_cuda.cuh).
void adamw_f32_update(cudaStream_t stream, float* param, const float* grad, float* m, float* v, std::int64_t count,
                      const AdamWHyper& hyper);

}  // namespace strata::adamw8bit::cuda
