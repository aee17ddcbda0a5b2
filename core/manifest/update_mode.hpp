#pragma once
// When the optimizer runs (train.update): after the whole backward pass (full), or block by block as
// each block's gradients are complete (fused: the full set of gradients never exists;
// docs/architecture.md, "The fused update"). Fused clipping needs a norm before the step's global
// one exists (train.fused_clip): the last step's, or each block's own.
#include <cstdint>

namespace strata {

enum class UpdateMode : std::uint8_t { full, fused };
enum class FusedClip : std::uint8_t { previous, per_block };

}  // namespace strata
