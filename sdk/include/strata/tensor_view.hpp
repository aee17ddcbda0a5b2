#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/dtype.hpp"

namespace strata {

// The groups of tensors that residency decisions move together, per layer.
enum class TensorGroup : std::uint8_t { weights, grads, optimizer_state, activations };

constexpr std::string_view group_name(TensorGroup group) noexcept {
  switch (group) {
    case TensorGroup::weights: return "weights";
    case TensorGroup::grads: return "grads";
    case TensorGroup::optimizer_state: return "optimizer_state";
    case TensorGroup::activations: return "activations";
  }
  return "weights";
}

// Where a tensor group lives right now.
enum class Residence : std::uint8_t { device, host, absent };

// A non-owning view of one f32 tensor; `data` is empty when the tensor is not allocated.
struct TensorView {
  std::string_view name;
  int layer = -1;  // -1 for tensors outside the transformer blocks
  std::span<float> data;
};

}  // namespace strata
