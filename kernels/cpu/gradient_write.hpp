#pragma once
#include <cstdint>

namespace strata::cpu {

// How a backward kernel writes an input gradient: added onto what the buffer holds (llm.c's
// convention, needed where several paths meet, as on the residual stream), or written over it,
// which spares zeroing a scratch buffer that only one kernel writes.
enum class GradientWrite : std::uint8_t { accumulate, overwrite };

}  // namespace strata::cpu
