#pragma once
// A LLaMA-family shape is the shared ModelShape (core/model/model_shape.hpp), every field of which
// LLaMA has; these are the family's rules over it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/adapter_targets.hpp"
#include "core/model/model_shape.hpp"
#include "strata/host_services.hpp"

namespace strata {

using LlamaConfig = ModelShape;

// The block matrices LoRA's `targets` name: q, k, v, o, gate, up and down.
std::vector<AdapterTarget> llama_adapter_targets(const LlamaConfig& config);
// `arch`: "llama", or a family built on LLaMA's blocks ("qwen2"); the count is the family's.
ModelInfo llama_info(const LlamaConfig& config, std::string_view arch, std::int64_t parameter_count);
// Empty when valid; otherwise what is wrong, naming the key.
std::string validate_llama(const LlamaConfig& config);
// RoPE's head_dim / 2 inverse frequencies under rope_scaling, in f32 as Hugging Face computes
// them; empty without scaling (the kernels then use theta^(-2i/head_dim) themselves).
std::vector<float> rope_inverse_frequencies(const LlamaConfig& config);

}  // namespace strata
