#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "strata/memory_category.hpp"

namespace strata {

// Raised when an allocation would take live bytes past the device's limit. The message states the
// request, the limit and the live bytes by category, and points at the strategies that help.
class MemoryLimitExceeded : public std::runtime_error {
 public:
  MemoryLimitExceeded(const std::string& arena, std::uint64_t requested_bytes, MemoryCategory category,
                      std::string_view owner, std::uint64_t limit_bytes, const CategoryBytes& live_bytes);
  // The memory itself ran out (a GPU without a limit, a limit above what the machine has, a
  // request larger than the host can give): `reserved` bytes were held, `limit_bytes` 0 when no
  // limit is set.
  static MemoryLimitExceeded exhausted(const std::string& arena, std::uint64_t requested_bytes, MemoryCategory category,
                                       std::string_view owner, std::uint64_t reserved, std::uint64_t limit_bytes,
                                       const CategoryBytes& live_bytes);

  std::uint64_t requested_bytes() const noexcept { return requested_bytes_; }
  MemoryCategory category() const noexcept { return category_; }

  // The same refusal told of the tensor that asked: its name, and what would make it fit
  // (`remedy`, in the manifest's words; empty: its category's usual remedy).
  MemoryLimitExceeded naming(std::string_view tensor, std::string_view remedy) const;

 private:
  MemoryLimitExceeded(std::string message, const MemoryLimitExceeded& cause);
  std::uint64_t requested_bytes_;
  MemoryCategory category_;
  std::string arena_;
  std::uint64_t limit_bytes_ = 0;
  CategoryBytes live_bytes_{};
  std::uint64_t exhausted_reserved_ = 0;  // the memory itself ran out with this many bytes held
  bool exhausted_ = false;
};

}  // namespace strata
