#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "strata/dtype.hpp"
#include "strata/memory_category.hpp"

namespace strata {

// The groups of tensors that residency decisions move together, per layer. masters (since 9.7):
// the f32 master copies of bf16 or quantized weights, alone; optimizer_state still holds them too,
// so moving optimizer_state moves the masters with the moments, as before 9.7.
enum class TensorGroup : std::uint8_t { weights, grads, optimizer_state, activations, masters };

constexpr std::string_view group_name(TensorGroup group) noexcept {
  switch (group) {
    case TensorGroup::weights: return "weights";
    case TensorGroup::grads: return "grads";
    case TensorGroup::optimizer_state: return "optimizer_state";
    case TensorGroup::activations: return "activations";
    case TensorGroup::masters: return "masters";
  }
  return "weights";
}

// Where a tensor group lives right now. (A later minor may add homes at the end: handle unknown
// values.) disk (since 9.3): the disk tier, [device] disk_path (HookContext::evict_to_disk).
enum class Residence : std::uint8_t { device, host, absent, disk };

// Where a view's memory is: the backend's (device) memory, which only ops and explicit copies
// touch, or host memory the caller may read.
enum class MemorySpace : std::uint8_t { device, host };

// A non-owning view of one tensor; `data` is null when the tensor is not allocated.
struct TensorView {
  std::string_view name;
  int layer = -1;  // -1 for tensors outside the transformer blocks
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t count = 0;  // elements
  MemorySpace space = MemorySpace::device;

  bool empty() const noexcept { return data == nullptr; }
  std::uint64_t bytes() const noexcept { return storage_bytes(dtype, count); }
  // The f32 elements, for ops; null unless the view is f32.
  float* f32() const noexcept { return dtype == DType::f32 ? static_cast<float*>(data) : nullptr; }
};

// What a plugin can learn about one tensor of the model without touching it (HookContext::tensors).
struct TensorInfo {
  std::string_view name;  // "h.3.attn.c_attn.weight", "h.3.act.qkv": what HookContext::tensor takes
  int layer = -1;         // -1 outside the blocks
  std::span<const std::int64_t> shape;
  DType dtype = DType::f32;  // as stored
  TensorGroup group = TensorGroup::weights;
  MemoryCategory category = MemoryCategory::other;
  Residence residence = Residence::absent;  // absent: not allocated now
  std::uint64_t bytes = 0;                  // as allocated
  // A block's activation that its backward recomputes by itself when a strategy drops only it
  // (HookContext::drop_activation_tensors): the op that does ("layernorm", "rmsnorm", "gelu",
  // "swiglu", "geglu", "attention"). Empty when only recomputing the whole block brings it back.
  std::string_view recomputed_by;
};

}  // namespace strata
