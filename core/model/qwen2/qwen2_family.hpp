#pragma once
// The Qwen2 family's descriptor (qwen2_family.cpp), for the registry's list.
#include "core/model/model_family.hpp"

namespace strata {

const ModelFamily& qwen2_family();

}  // namespace strata
