#pragma once
// AdamW with both moments stored block-wise quantized (8-bit optimizers, Dettmers et al., 2022):
// the first moment m on the signed dynamic map, the second v on the unsigned one, each block of
// block_size consecutive elements (the last may be shorter) as one byte per element plus the
// block's absmax (dynamic_quantization.hpp).
//
// Per block: dequantize m and v, run AdamW's f32 element (strata/kernels_common.hpp, the adamw
// plugin's too; param moves with the new f32 moments), then store the new m and v quantized against
// the block's new absmax. Blocks are independent and threaded with OpenMP (schedule(static)), so the
// result is bitwise the same for any thread count. This file builds without floating-point
// contraction, so every instruction set (the run-time clones) and the adamw plugin round alike.
//
// State starts zeroed: all-zero codes and absmax decode as m = 0 and v = 0 (an absmax of 0 marks a
// zero block, whatever its codes; dynamic_quantization.hpp).
// Nothing is validated here (block sizes of 256 .. 4096 are the intended range; count need not be
// a multiple): the caller checks its configuration.
#include <cstdint>

#include "strata/ops.hpp"

namespace strata::adamw8bit {

// codes: count bytes; absmax: block_count(count, block_size) floats.
struct QuantizedMoment {
  std::uint8_t* codes;
  float* absmax;
};

void adamw8bit_update(float* param, const float* grad, QuantizedMoment m, QuantizedMoment v, std::int64_t count,
                      std::int64_t block_size, const strata::AdamWHyper& hyper);
// A small tensor's update, with f32 moments: AdamW's own loop (strata/plugin_support/adamw_update.hpp).
void adamw_f32_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                      const strata::AdamWHyper& hyper);

}  // namespace strata::adamw8bit
