#pragma once
// Loops that the CPU kernels of core and of plugins share, so that a plugin's kernel computes a
// step exactly as the core kernel it stands in for, from one text.
//
// Every helper is inline and always inlined: it compiles into its caller with the caller's flags
// (-ffp-contract, -ffast-math) and, inside a STRATA_CPU_CLONES function, once per clone for that
// clone's instruction set. So a helper rounds as its caller's own loop would, whichever copy the
// linker keeps. The loops carry OpenMP pragmas: build with OpenMP (strata_add_plugin does) for the
// threads; without it they run on one thread with the same results (and no unknown-pragma warning).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "strata/host_device.hpp"
#include "strata/ops.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define STRATA_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define STRATA_ALWAYS_INLINE inline
#endif

namespace strata::kernels {

// A per-column sum over the rows of an (rows, columns) row-major operand: row_body(n, begin, end)
// adds row n's columns [begin, end) into the sums. The columns go in blocks of 64, spread over
// the threads when `threads` is true; within a block the rows go in order. So a column's sum does
// not depend on the thread count, and calls over consecutive row ranges add as one call over all.
template <typename RowBody>
STRATA_ALWAYS_INLINE void sum_rows_by_column_blocks(std::int64_t rows, std::int64_t columns, RowBody row_body,
                                                    [[maybe_unused]] bool threads = true) {
  constexpr std::int64_t kBlock = 64;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (threads) firstprivate(row_body)
#endif
  for (std::int64_t block_start = 0; block_start < columns; block_start += kBlock) {
    const std::int64_t block_end = std::min(block_start + kBlock, columns);
    for (std::int64_t n = 0; n < rows; ++n) row_body(n, block_start, block_end);
  }
}

// A linear layer's bias gradient: dbias[o] += sum_n dout[n, o], dout (rows, out_features).
STRATA_ALWAYS_INLINE void bias_backward(float* dbias, const float* dout, std::int64_t rows, std::int64_t out_features,
                                        bool threads = true) {
  sum_rows_by_column_blocks(
      rows, out_features,
      [=](std::int64_t n, std::int64_t begin, std::int64_t end) __attribute__((always_inline)) {
        const float* row = dout + n * out_features;
#ifdef _OPENMP
#pragma omp simd
#endif
        for (std::int64_t o = begin; o < end; ++o) dbias[o] += row[o];
      },
      threads);
}

// The constants of one AdamW step (decoupled weight decay, bias correction), at step t:
//   decay = 1 - lr wd;  step_size = lr / (1 - b1^t);  inverse_sqrt_correction2 = 1 / sqrt(1 - b2^t)
struct AdamWCoefficients {
  float b1, b2, inverse_sqrt_correction2, decay, step_size, grad_scale, eps;
};

STRATA_ALWAYS_INLINE AdamWCoefficients adamw_coefficients(const AdamWHyper& hyper) {
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

struct AdamWMoments {
  float m, v;
};

// One element of the AdamW update, in place, PyTorch's order of operations:
//   g = grad * grad_scale;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   param = param * decay - step_size * m / (sqrt(v) * inverse_sqrt_correction2 + eps)
// Returns the new m and v (use them rather than read m and v back: a loop that reads them back
// after the write to param may not vectorize). Branch-free, so a loop of it vectorizes. Pass the
// coefficients from a local copy: a loop that reads them through a pointer may reload them at
// every element.
STRATA_ALWAYS_INLINE STRATA_HOST_DEVICE AdamWMoments adamw_element(float& param, float grad, float& m, float& v,
                                                                   const AdamWCoefficients& c) {
  const float g = grad * c.grad_scale;
  const float m_new = c.b1 * m + (1.0f - c.b1) * g;
  const float v_new = c.b2 * v + (1.0f - c.b2) * g * g;
  m = m_new;
  v = v_new;
  const float denominator = std::sqrt(v_new) * c.inverse_sqrt_correction2 + c.eps;
  param = param * c.decay - c.step_size * m_new / denominator;
  return {m_new, v_new};
}

}  // namespace strata::kernels
