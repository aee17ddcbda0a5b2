#include "cpu/adamw_cpu.hpp"

#include "strata/plugin_support/adamw_update.hpp"

namespace strata::adamw::cpu {

void update(float* param, const float* grad, float* m, float* v, std::int64_t count, const AdamWHyper& hyper) {
  plugin_support::adamw_update_f32(param, grad, m, v, count, hyper);
}

}  // namespace strata::adamw::cpu
