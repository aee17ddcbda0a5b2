#pragma once
// Every tensor the model will hold is a row here before any byte is allocated (llm.c's habit):
// memory decisions change rows (home, dtype), they do not call malloc. The table prints with MiB
// per row and totals per category, so a user sees every byte.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "strata/dtype.hpp"
#include "strata/memory_category.hpp"
#include "strata/tensor_view.hpp"

namespace strata {

// Where a row's bytes live: device memory, the host arena, or the disk tier (core/residency/disk_tier.hpp).
enum class Home : std::uint8_t { device, host, disk };

constexpr const char* home_name(Home home) noexcept {
  return home == Home::device ? "device" : home == Home::host ? "host" : "disk";
}

// The SDK's word for a held row's home.
constexpr Residence residence_of(Home home) noexcept {
  return home == Home::device ? Residence::device : home == Home::host ? Residence::host : Residence::disk;
}

// Allocations are rounded up to this many bytes; rows report the rounded size, so the table's
// totals equal the allocator's live bytes exactly.
inline constexpr std::uint64_t kAllocationGranularity = 64;

// A row's element type is the SDK's dtype (f32, bf16, i32, i8, u8).
using ElementType = DType;

inline std::int64_t shape_elements(const std::vector<std::int64_t>& shape) noexcept {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  return count;
}

struct TensorRow {
  std::string name;
  int layer = -1;
  std::vector<std::int64_t> shape;
  ElementType element = ElementType::f32;
  MemoryCategory category = MemoryCategory::other;
  TensorGroup group = TensorGroup::activations;
  Home home = Home::device;
  // What makes this row fit when it does not, in the manifest's words (the LM head's logits:
  // recomputing them); empty: its category's usual remedy (MemoryLimitExceeded).
  std::string remedy;

  std::int64_t elements() const;
  std::uint64_t bytes() const;  // allocated bytes, rounded up to kAllocationGranularity
};

class TensorTable {
 public:
  int add(TensorRow row);  // returns the row's index
  const TensorRow& row(int index) const { return rows_.at(static_cast<std::size_t>(index)); }
  TensorRow& row(int index) { return rows_.at(static_cast<std::size_t>(index)); }
  const std::vector<TensorRow>& rows() const noexcept { return rows_; }
  std::optional<int> find(std::string_view name) const;

  // Sum of rows' bytes by category, for rows whose home is `home`.
  CategoryBytes totals(Home home) const;

  // name, layer, shape, dtype, category, home, MiB; then totals per category. `summarize_layers`
  // prints layer 0 in full and folds the other layers into one line per row kind.
  void print(std::ostream& out, bool summarize_layers = true) const;

 private:
  std::vector<TensorRow> rows_;
  std::unordered_map<std::string, int> index_by_name_;
};

}  // namespace strata
