#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "strata/memory_category.hpp"

namespace strata {

// Raised when an allocation would take live bytes past the device's limit. The message states the
// request, the limit and the live bytes by category, and points at the strategies that help.
class MemoryLimitExceeded : public std::runtime_error {
 public:
  MemoryLimitExceeded(const std::string& arena, std::uint64_t requested_bytes, MemoryCategory category,
                      std::string_view owner, std::uint64_t limit_bytes, const CategoryBytes& live_bytes);

  std::uint64_t requested_bytes() const noexcept { return requested_bytes_; }
  MemoryCategory category() const noexcept { return category_; }

 private:
  std::uint64_t requested_bytes_;
  MemoryCategory category_;
};

}  // namespace strata
