#pragma once
// The Gemma family's descriptor (gemma_family.cpp), for the registry's list.
#include "core/model/model_family.hpp"

namespace strata {

const ModelFamily& gemma_family();

}  // namespace strata
