#include "core/util/profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace strata {

std::string_view profile_kind_name(ProfileKind kind) noexcept {
  switch (kind) {
    case ProfileKind::embedding_forward: return "embedding_forward";
    case ProfileKind::layernorm_forward: return "layernorm_forward";
    case ProfileKind::rmsnorm_forward: return "rmsnorm_forward";
    case ProfileKind::rope: return "rope";
    case ProfileKind::matmul_forward: return "matmul_forward";
    case ProfileKind::attention_forward: return "attention_forward";
    case ProfileKind::gelu_forward: return "gelu_forward";
    case ProfileKind::swiglu_forward: return "swiglu_forward";
    case ProfileKind::geglu_forward: return "geglu_forward";
    case ProfileKind::residual_forward: return "residual_forward";
    case ProfileKind::lm_head_forward: return "lm_head_forward";
    case ProfileKind::cross_entropy_forward: return "cross_entropy_forward";
    case ProfileKind::cross_entropy_backward: return "cross_entropy_backward";
    case ProfileKind::lm_head_backward: return "lm_head_backward";
    case ProfileKind::matmul_backward: return "matmul_backward";
    case ProfileKind::attention_backward: return "attention_backward";
    case ProfileKind::gelu_backward: return "gelu_backward";
    case ProfileKind::swiglu_backward: return "swiglu_backward";
    case ProfileKind::geglu_backward: return "geglu_backward";
    case ProfileKind::layernorm_backward: return "layernorm_backward";
    case ProfileKind::rmsnorm_backward: return "rmsnorm_backward";
    case ProfileKind::embedding_backward: return "embedding_backward";
    case ProfileKind::zero_fill: return "zero_fill";
    case ProfileKind::optimizer_step: return "optimizer_step";
    case ProfileKind::residency_transfer: return "residency_transfer";
    case ProfileKind::bf16_convert: return "bf16_convert";
    case ProfileKind::count: break;
  }
  return "?";
}

void Profiler::print(std::ostream& out, std::int64_t steps) const {
  std::vector<std::size_t> order(ms_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ms_[a] > ms_[b]; });
  double total = 0.0;
  for (double value : ms_) total += value;
  const double divisor = steps > 0 ? static_cast<double>(steps) : 1.0;
  char line[128];
  std::snprintf(line, sizeof line, "%-24s %12s %8s\n", "kernel", steps > 0 ? "ms/step" : "ms", "share");
  out << line;
  for (std::size_t index : order) {
    if (ms_[index] <= 0.0) continue;
    std::snprintf(line, sizeof line, "%-24s %12.2f %7.1f%%\n",
                  std::string(profile_kind_name(static_cast<ProfileKind>(index))).c_str(), ms_[index] / divisor,
                  total > 0 ? 100.0 * ms_[index] / total : 0.0);
    out << line;
  }
}

}  // namespace strata
