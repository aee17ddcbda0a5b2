#include "core/model/kv_cache.hpp"

namespace strata {

KvCache::KvCache(Backend& backend, int n_layer, std::int64_t capacity, std::int64_t kv_width) : capacity_(capacity) {
  const auto bytes = static_cast<std::uint64_t>(capacity * kv_width) * sizeof(float);
  for (int l = 0; l < n_layer; ++l) {
    keys_.push_back(backend.device_memory().allocate(bytes, MemoryCategory::activations, "kv_cache"));
    values_.push_back(backend.device_memory().allocate(bytes, MemoryCategory::activations, "kv_cache"));
  }
}

std::uint64_t KvCache::bytes() const noexcept {
  std::uint64_t total = 0;
  for (const Buffer& buffer : keys_) total += buffer.bytes();
  for (const Buffer& buffer : values_) total += buffer.bytes();
  return total;
}

}  // namespace strata
