#include "plugins/adamw8bit/cpu/adamw8bit_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "plugins/adamw8bit/cpu/dynamic_quantization.hpp"
#include "strata/cpu_clones.hpp"

namespace strata::adamw8bit {

namespace {

// The step's constants, computed as kernels/cpu/adamw.cpp computes them.
struct Coefficients {
  float b1, b2, inverse_sqrt_correction2, decay, step_size, grad_scale, eps;
};

Coefficients coefficients_of(const AdamWHyper& hyper) {
  const float b1 = hyper.beta1;
  const float b2 = hyper.beta2;
  const float inverse_correction1 = 1.0f / (1.0f - std::pow(b1, static_cast<float>(hyper.step)));
  const float inverse_sqrt_correction2 = 1.0f / std::sqrt(1.0f - std::pow(b2, static_cast<float>(hyper.step)));
  return {b1,
          b2,
          inverse_sqrt_correction2,
          1.0f - hyper.lr * hyper.weight_decay,
          hyper.lr * inverse_correction1,
          hyper.grad_scale,
          hyper.eps};
}

struct BlockAbsmax {
  float m, v;
};

// The f32 AdamW update of one block, m and v (dequantized) replaced by their new values in place;
// returns their new absmax. Branch-free, so it vectorizes like kernels/cpu/adamw.cpp.
STRATA_CPU_CLONES BlockAbsmax update_block(float* param, const float* grad, float* m, float* v, std::int64_t count,
                                           const Coefficients& c) {
  const float b1 = c.b1;
  const float b2 = c.b2;
  const float inverse_sqrt_correction2 = c.inverse_sqrt_correction2;
  const float decay = c.decay;
  const float step_size = c.step_size;
  const float grad_scale = c.grad_scale;
  const float eps = c.eps;
  float m_absmax = 0.0f;
  float v_absmax = 0.0f;
#pragma omp simd reduction(max : m_absmax, v_absmax)
  for (std::int64_t i = 0; i < count; ++i) {
    const float g = grad[i] * grad_scale;
    const float m_new = b1 * m[i] + (1.0f - b1) * g;
    const float v_new = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = m_new;
    v[i] = v_new;
    const float denominator = std::sqrt(v_new) * inverse_sqrt_correction2 + eps;
    param[i] = param[i] * decay - step_size * m_new / denominator;
    m_absmax = std::max(m_absmax, std::abs(m_new));
    v_absmax = std::max(v_absmax, v_new);
  }
  return {m_absmax, v_absmax};
}

}  // namespace

void adamw8bit_update(float* param, const float* grad, QuantizedMoment m, QuantizedMoment v, std::int64_t count,
                      std::int64_t block_size, const AdamWHyper& hyper) {
  const Coefficients c = coefficients_of(hyper);
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

}  // namespace strata::adamw8bit
