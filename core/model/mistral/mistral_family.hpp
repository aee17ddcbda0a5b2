#pragma once
// The Mistral family's descriptor (mistral_family.cpp), for the registry's list.
#include "core/model/model_family.hpp"

namespace strata {

const ModelFamily& mistral_family();

}  // namespace strata
