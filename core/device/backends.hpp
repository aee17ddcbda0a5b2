#pragma once
// The backends this build can run on: "cpu" always; "cuda:N" for each visible device when the build
// has the CUDA backend (STRATA_CUDA). The conformance test (tests/test_backend_ops.cpp) runs its
// table on each.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device/backend.hpp"

namespace strata {

std::vector<std::string> available_backends();

// N of "cuda:N", or -1 when kind is not of that form.
int cuda_ordinal(const std::string& kind);

// Whether this build has the CUDA backend compiled in.
bool cuda_backend_built();

// Why `kind` cannot run here ("no CUDA device visible (...)", "this build has no CUDA backend"),
// or empty when it can.
std::string backend_unavailable_reason(const std::string& kind);

// Throws std::invalid_argument naming the kind when this build or machine cannot run it.
// tf32_products: a GPU runs f32 products (f32 weights' matmuls, the LM head, attention) on TF32
// tensor cores; the CPU has none and computes them in f32 either way.
std::unique_ptr<Backend> make_backend(const std::string& kind, std::uint64_t device_memory_limit,
                                      bool tf32_products = false);

}  // namespace strata
