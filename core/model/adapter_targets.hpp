#pragma once
// A block matrix a matmul adapter (LoRA) may target, by the name users write in `targets`; each
// family lists its own (core/model/<family>/, ModelFamily::adapter_targets).
#include <string>

#include "strata/ops.hpp"

namespace strata {

struct AdapterTarget {
  std::string target;  // "qkv"
  std::string matrix;  // the block's parameter, "attn.c_attn.weight"
  MatmulShape shape;   // rows unused
};

}  // namespace strata
