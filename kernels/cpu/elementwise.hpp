#pragma once
// Elementwise arithmetic for optimizers written against the op table (strata/ops.hpp gives each
// formula): sign, product, quotient with an epsilon, square root. Outputs may alias inputs.
#include <cstdint>

namespace strata::cpu {

void sign(float* out, const float* x, std::int64_t count);
void mul(float* out, const float* a, const float* b, std::int64_t count);
void div(float* out, const float* a, const float* b, float eps, std::int64_t count);
void sqrt(float* out, const float* x, std::int64_t count);

}  // namespace strata::cpu
