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

void describe_live(std::ostringstream& message, const CategoryBytes& live_bytes) {
  message << " (live:";
  for (MemoryCategory each : kAllMemoryCategories)
    message << ' ' << category_name(each) << '=' << format_bytes(live_bytes[category_index(each)]);
  message << ")";
}

std::string describe(const std::string& arena, std::uint64_t requested_bytes, MemoryCategory category,
                     std::string_view owner, std::uint64_t limit_bytes, const CategoryBytes& live_bytes) {
  std::ostringstream message;
  message << arena << ": memory limit exceeded: " << owner << " requested " << format_bytes(requested_bytes) << " of "
          << category_name(category) << " with " << format_bytes(total_bytes(live_bytes)) << " live of a "
          << format_bytes(limit_bytes) << " limit";
  describe_live(message, live_bytes);
  message << ". Raise device.memory_limit or try " << advice_for(category) << '.';
  return message.str();
}

}  // namespace

MemoryLimitExceeded::MemoryLimitExceeded(const std::string& arena, std::uint64_t requested_bytes,
                                         MemoryCategory category, std::string_view owner, std::uint64_t limit_bytes,
                                         const CategoryBytes& live_bytes)
    : std::runtime_error(describe(arena, requested_bytes, category, owner, limit_bytes, live_bytes)),
      requested_bytes_(requested_bytes),
      category_(category),
      arena_(arena),
      limit_bytes_(limit_bytes),
      live_bytes_(live_bytes) {}

MemoryLimitExceeded::MemoryLimitExceeded(std::string message, const MemoryLimitExceeded& cause)
    : std::runtime_error(message),
      requested_bytes_(cause.requested_bytes_),
      category_(cause.category_),
      arena_(cause.arena_),
      limit_bytes_(cause.limit_bytes_),
      live_bytes_(cause.live_bytes_),
      exhausted_reserved_(cause.exhausted_reserved_),
      exhausted_(cause.exhausted_) {}

namespace {

// Where the memory ran out rather than the limit: what was held, and the limit when there is one.
std::string exhausted_reason(std::uint64_t reserved, std::uint64_t limit_bytes, const CategoryBytes& live_bytes) {
  return "which the memory itself could not provide, with " + format_bytes(total_bytes(live_bytes)) + " live and " +
         format_bytes(reserved) + " held (" +
         (limit_bytes == 0 ? std::string("no memory_limit is set") : "memory_limit is " + format_bytes(limit_bytes)) +
         ")";
}

}  // namespace

MemoryLimitExceeded MemoryLimitExceeded::exhausted(const std::string& arena, std::uint64_t requested_bytes,
                                                   MemoryCategory category, std::string_view owner,
                                                   std::uint64_t reserved, std::uint64_t limit_bytes,
                                                   const CategoryBytes& live_bytes) {
  std::ostringstream message;
  message << arena << ": out of memory: " << owner << " requested " << format_bytes(requested_bytes) << " of "
          << category_name(category) << ", " << exhausted_reason(reserved, limit_bytes, live_bytes);
  describe_live(message, live_bytes);
  message << ". Try " << advice_for(category) << '.';
  MemoryLimitExceeded error(arena, requested_bytes, category, owner, limit_bytes, live_bytes);
  error.exhausted_ = true;
  error.exhausted_reserved_ = reserved;
  return MemoryLimitExceeded(message.str(), error);
}

MemoryLimitExceeded MemoryLimitExceeded::naming(std::string_view tensor, std::string_view remedy) const {
  std::ostringstream message;
  if (exhausted_)
    message << arena_ << ": out of memory: " << tensor << " (" << format_bytes(requested_bytes_) << " of "
            << category_name(category_) << "), " << exhausted_reason(exhausted_reserved_, limit_bytes_, live_bytes_);
  else
    message << arena_ << ": memory limit exceeded: " << tensor << " (" << format_bytes(requested_bytes_) << " of "
            << category_name(category_) << ") does not fit beside the " << format_bytes(total_bytes(live_bytes_))
            << " live of a " << format_bytes(limit_bytes_) << " limit";
  describe_live(message, live_bytes_);
  message << ". " << (remedy.empty() ? "Try " + std::string(advice_for(category_)) : std::string(remedy))
          << (exhausted_ ? "; or let `strata plan MANIFEST --fit device=SIZE` find a stack that fits."
                         : "; or raise device.memory_limit, or let `strata plan MANIFEST --fit device=SIZE` find a "
                           "stack that fits.");
  return MemoryLimitExceeded(message.str(), *this);
}

}  // namespace strata
