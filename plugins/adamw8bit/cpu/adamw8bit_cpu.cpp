#include "cpu/adamw8bit_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/dynamic_quantization.hpp"
#include "strata/cpu_clones.hpp"
#include "strata/kernels_common.hpp"
#include "strata/plugin_support/adamw_update.hpp"

namespace strata::adamw8bit {

namespace {

struct BlockAbsmax {
  float m, v;
};

// The f32 AdamW update of one block, element for element kernels/cpu/adamw.cpp's, m and v
// (dequantized) replaced by their new values in place; returns their new absmax. Branch-free, so
// it vectorizes.
STRATA_CPU_CLONES BlockAbsmax update_block(float* param, const float* grad, float* m, float* v, std::int64_t count,
                                           const kernels::AdamWCoefficients& coefficients) {
  const kernels::AdamWCoefficients c = coefficients;  // a local copy: not reloaded at every element
  float m_absmax = 0.0f;
  float v_absmax = 0.0f;
#pragma omp simd reduction(max : m_absmax, v_absmax)
  for (std::int64_t i = 0; i < count; ++i) {
    const kernels::AdamWMoments updated = kernels::adamw_element(param[i], grad[i], m[i], v[i], c);
    // Scalars, not the struct's fields, go to std::max: OpenMP privatizes what a reference is
    // taken of, and a privatized struct does not vectorize.
    const float m_new = updated.m;
    const float v_new = updated.v;
    m_absmax = std::max(m_absmax, std::abs(m_new));
    v_absmax = std::max(v_absmax, v_new);
  }
  return {m_absmax, v_absmax};
}

}  // namespace

void adamw8bit_update(float* param, const float* grad, QuantizedMoment m, QuantizedMoment v, std::int64_t count,
                      std::int64_t block_size, const AdamWHyper& hyper) {
  const kernels::AdamWCoefficients c = kernels::adamw_coefficients(hyper);
  const std::int64_t blocks = block_count(count, block_size);
#pragma omp parallel
  {
    // One block of each moment in f32, per thread: at most 32 KiB at block size 4096.
    std::vector<float> m_block(static_cast<std::size_t>(block_size));
    std::vector<float> v_block(static_cast<std::size_t>(block_size));
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t start = b * block_size;
      const std::int64_t length = std::min(block_size, count - start);
      dequantize_block(m_block.data(), m.codes + start, length, m.absmax[b], MapKind::signed_dynamic);
      dequantize_block(v_block.data(), v.codes + start, length, v.absmax[b], MapKind::unsigned_dynamic);
      const BlockAbsmax absmax = update_block(param + start, grad + start, m_block.data(), v_block.data(), length, c);
      m.absmax[b] = absmax.m;
      v.absmax[b] = absmax.v;
      quantize_block(m.codes + start, m_block.data(), length, absmax.m, MapKind::signed_dynamic);
      quantize_block(v.codes + start, v_block.data(), length, absmax.v, MapKind::unsigned_dynamic);
    }
  }
}

void adamw_f32_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                      const strata::AdamWHyper& hyper) {
  plugin_support::adamw_update_f32(param, grad, m, v, count, hyper);
}

}  // namespace strata::adamw8bit
