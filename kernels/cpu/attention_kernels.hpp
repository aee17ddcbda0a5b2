#pragma once
// The built-in attention implementations behind the SDK's Kernel interface, so `[kernels]
// attention = "reference" | "fast"` and a plugin's kernel are chosen the same way.
#include <memory>
#include <string_view>

#include "strata/kernel.hpp"

namespace strata::cpu {

enum class AttentionImpl { reference, fast };

std::unique_ptr<Kernel> make_attention_kernel(AttentionImpl impl);

}  // namespace strata::cpu
