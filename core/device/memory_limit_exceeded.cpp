#include "core/device/memory_limit_exceeded.hpp"

#include <sstream>

#include "core/util/format_bytes.hpp"

namespace strata {

namespace {

std::string_view advice_for(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::activations:
      return "activation checkpointing ([[strategy]] plugin = \"checkpoint\") or more micro_batches";
    case MemoryCategory::optimizer:
      return "optimizer-state offload ([[strategy]] plugin = \"offload\", optimizer_state = \"host\")";
    case MemoryCategory::weights:
    case MemoryCategory::grads: return "layer streaming ([[strategy]] plugin = \"offload\", max_resident_layers = 2)";
    default: return "a smaller batch or seq_len";
  }
}

std::string describe(const std::string& arena, std::uint64_t requested_bytes, MemoryCategory category,
                     std::string_view owner, std::uint64_t limit_bytes, const CategoryBytes& live_bytes) {
  std::ostringstream message;
  message << arena << ": memory limit exceeded: " << owner << " requested " << format_bytes(requested_bytes) << " of "
          << category_name(category) << " with " << format_bytes(total_bytes(live_bytes)) << " live of a "
          << format_bytes(limit_bytes) << " limit (live:";
  for (MemoryCategory each : kAllMemoryCategories)
    message << ' ' << category_name(each) << '=' << format_bytes(live_bytes[category_index(each)]);
  message << "). Raise device.memory_limit or try " << advice_for(category) << '.';
  return message.str();
}

}  // namespace

MemoryLimitExceeded::MemoryLimitExceeded(const std::string& arena, std::uint64_t requested_bytes,
                                         MemoryCategory category, std::string_view owner, std::uint64_t limit_bytes,
                                         const CategoryBytes& live_bytes)
    : std::runtime_error(describe(arena, requested_bytes, category, owner, limit_bytes, live_bytes)),
      requested_bytes_(requested_bytes),
      category_(category) {}

}  // namespace strata
