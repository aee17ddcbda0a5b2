#include "core/residency/tensor_table.hpp"

#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "core/errors/manifest_error.hpp"
#include "core/util/format_bytes.hpp"

namespace strata {

namespace {
std::string shape_text(const std::vector<std::int64_t>& shape);
constexpr std::uint64_t kMaxRowBytes = std::uint64_t{1} << 50;  // 1 PiB: far past any machine
}  // namespace

std::int64_t TensorRow::elements() const {
  return shape_elements(shape);
}

std::uint64_t TensorRow::bytes() const {
  const std::uint64_t raw = std::max<std::uint64_t>(1, storage_bytes(element, elements()));
  return (raw + kAllocationGranularity - 1) / kAllocationGranularity * kAllocationGranularity;
}

int TensorTable::add(TensorRow row) {
  if (index_by_name_.contains(row.name)) throw std::logic_error("tensor table: duplicate row '" + row.name + "'");
  // A shape too large to count in bytes would wrap every total after it (a petabyte row, a 0 MiB
  // row): it is invalid input, named, before anything is planned or allocated.
  // (A u4 element counts as a whole byte here: an upper bound.)
  std::uint64_t bytes = storage_bytes(row.element, 1);
  for (const std::int64_t extent : row.shape)
    if (extent < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(extent), &bytes) || bytes > kMaxRowBytes)
      throw ManifestError("tensor '" + row.name + "' of shape " + shape_text(row.shape) + " needs more than " +
                          format_bytes(kMaxRowBytes) + ": the manifest's [model] and [train] batch are too large");
  const int index = static_cast<int>(rows_.size());
  index_by_name_.emplace(row.name, index);
  rows_.push_back(std::move(row));
  return index;
}

std::optional<int> TensorTable::find(std::string_view name) const {
  auto found = index_by_name_.find(std::string(name));
  if (found == index_by_name_.end()) return std::nullopt;
  return found->second;
}

CategoryBytes TensorTable::totals(Home home) const {
  CategoryBytes totals{};
  for (const TensorRow& row : rows_)
    if (row.home == home) totals[category_index(row.category)] += row.bytes();
  return totals;
}

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::ostringstream text;
  text << '(';
  for (std::size_t i = 0; i < shape.size(); ++i) text << (i ? "," : "") << shape[i];
  text << ')';
  return text.str();
}

// The layer's number in a row's name as "*": "h.3.ln_1.weight" -> "h.*.ln_1.weight",
// "model.layers.3.mlp.up_proj.weight" -> "model.layers.*.mlp.up_proj.weight".
std::string layer_pattern(const TensorRow& row) {
  if (row.layer < 0) return row.name;
  const std::string segment = "." + std::to_string(row.layer) + ".";
  const std::size_t at = row.name.find(segment);
  if (at == std::string::npos) return row.name;
  return row.name.substr(0, at) + ".*." + row.name.substr(at + segment.size());
}

}  // namespace

void TensorTable::print(std::ostream& out, bool summarize_layers) const {
  int layer_count = 0;
  for (const TensorRow& row : rows_) layer_count = std::max(layer_count, row.layer + 1);
  // The name column fits the longest name (LLaMA's run to 50 characters), and is at least 34 wide.
  std::size_t name_width = 34;
  for (const TensorRow& row : rows_) name_width = std::max(name_width, row.name.size() + 2);
  const int width = static_cast<int>(name_width);
  out << std::left << std::setw(width) << "tensor" << std::setw(7) << "layer" << std::setw(20) << "shape"
      << std::setw(6) << "dtype" << std::setw(13) << "category" << std::setw(8) << "home" << std::right << std::setw(12)
      << "MiB" << '\n';
  for (const TensorRow& row : rows_) {
    if (summarize_layers && row.layer > 0) continue;
    const bool folded = summarize_layers && row.layer == 0 && layer_count > 1;
    const std::uint64_t bytes = folded ? row.bytes() * static_cast<std::uint64_t>(layer_count) : row.bytes();
    out << std::left << std::setw(width) << (folded ? layer_pattern(row) : row.name) << std::setw(7)
        << (row.layer < 0 ? std::string("-")
            : folded      ? "x" + std::to_string(layer_count)
                          : std::to_string(row.layer))
        << std::setw(20) << shape_text(row.shape) << std::setw(6) << dtype_name(row.element) << std::setw(13)
        << category_name(row.category) << std::setw(8) << home_name(row.home) << std::right << std::setw(12)
        << format_mib(bytes) << '\n';
  }
  for (Home home : {Home::device, Home::host, Home::disk}) {
    const CategoryBytes totals_by_category = totals(home);
    if (total_bytes(totals_by_category) == 0) continue;
    out << home_name(home) << " totals:";
    for (MemoryCategory category : kAllMemoryCategories)
      out << "  " << category_name(category) << ' ' << format_mib(totals_by_category[category_index(category)]);
    out << "  | all " << format_mib(total_bytes(totals_by_category)) << " MiB\n";
  }
}

}  // namespace strata
