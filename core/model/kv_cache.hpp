#pragma once
// The keys and values a decoding model has computed: per layer, (capacity, n_kv_head * head_dim)
// f32 rows for each, position-major, on the model's backend and accounted there as activations
// of "kv_cache". Ops::attention_decode appends to them and reads them (strata/ops.hpp).
#include <cstdint>
#include <vector>

#include "core/device/backend.hpp"

namespace strata {

class KvCache {
 public:
  KvCache(Backend& backend, int n_layer, std::int64_t capacity, std::int64_t kv_width);
  float* keys(int layer) const { return static_cast<float*>(keys_.at(static_cast<std::size_t>(layer)).data()); }
  float* values(int layer) const { return static_cast<float*>(values_.at(static_cast<std::size_t>(layer)).data()); }
  std::int64_t capacity() const noexcept { return capacity_; }
  std::uint64_t bytes() const noexcept;

 private:
  std::int64_t capacity_;
  std::vector<Buffer> keys_, values_;
};

}  // namespace strata
