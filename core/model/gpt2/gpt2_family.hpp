#pragma once
// The GPT-2 family's descriptor (gpt2_family.cpp), for the registry's list.
#include "core/model/model_family.hpp"

namespace strata {

const ModelFamily& gpt2_family();

}  // namespace strata
