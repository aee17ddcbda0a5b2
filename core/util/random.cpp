#include "core/util/random.hpp"

namespace strata {

void Random::fill_normal(std::span<float> out, double std_dev) noexcept {
  const std::uint64_t first = state_;
  const auto count = static_cast<std::int64_t>(out.size());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    out[static_cast<std::size_t>(i)] =
        static_cast<float>(normal_at(first + 2 * static_cast<std::uint64_t>(i)) * std_dev);
  state_ += 2 * static_cast<std::uint64_t>(count);
}

}  // namespace strata
