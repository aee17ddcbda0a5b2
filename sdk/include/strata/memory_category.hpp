#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata {

// Every allocation is tagged with one of these; the allocator keeps live and peak bytes per tag.
enum class MemoryCategory : std::uint8_t { weights, grads, optimizer, activations, workspace, other };

inline constexpr std::size_t kMemoryCategoryCount = 6;

inline constexpr std::array<MemoryCategory, kMemoryCategoryCount> kAllMemoryCategories = {
    MemoryCategory::weights,     MemoryCategory::grads,     MemoryCategory::optimizer,
    MemoryCategory::activations, MemoryCategory::workspace, MemoryCategory::other};

constexpr std::string_view category_name(MemoryCategory category) noexcept {
  switch (category) {
    case MemoryCategory::weights: return "weights";
    case MemoryCategory::grads: return "grads";
    case MemoryCategory::optimizer: return "optimizer";
    case MemoryCategory::activations: return "activations";
    case MemoryCategory::workspace: return "workspace";
    case MemoryCategory::other: return "other";
  }
  return "other";
}

// Bytes per category, indexed by the enum's value.
using CategoryBytes = std::array<std::uint64_t, kMemoryCategoryCount>;

constexpr std::size_t category_index(MemoryCategory category) noexcept {
  return static_cast<std::size_t>(category);
}

constexpr std::uint64_t total_bytes(const CategoryBytes& bytes) noexcept {
  std::uint64_t total = 0;
  for (auto value : bytes) total += value;
  return total;
}

}  // namespace strata
