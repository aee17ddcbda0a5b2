#pragma once
#include <memory>

#include "core/model/model.hpp"
#include "core/model/model_spec.hpp"
#include "strata/kernel.hpp"

namespace strata {

// The family the spec names, built on `backend` with the manifest's attention kernel.
std::unique_ptr<Model> make_model(const ModelSpec& spec, Backend& backend, Kernel& attention,
                                  const ModelOptions& options);

}  // namespace strata
