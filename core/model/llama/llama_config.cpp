#include "core/model/llama/llama_config.hpp"

#include <cmath>
#include <numbers>

namespace strata {

std::int64_t LlamaConfig::parameter_count() const {
  const std::int64_t C = d_model, F = d_ff, KV = kv_dim();
  const std::int64_t biases = attention_bias ? C + 2 * KV : 0;
  const std::int64_t per_layer = 2 * C + C * C + 2 * KV * C + C * C + 3 * C * F + biases;
  const std::int64_t embeddings = static_cast<std::int64_t>(vocab) * C * (tie_embeddings ? 1 : 2);
  return embeddings + n_layer * per_layer + C;
}

std::string LlamaConfig::validate() const {
  if (n_layer < 1) return "model.n_layer must be >= 1";
  if (n_head < 1 || n_kv_head < 1) return "model.n_head and model.n_kv_head must be >= 1";
  if (d_model % n_head != 0)
    return "model.n_head = " + std::to_string(n_head) + " must divide model.d_model = " + std::to_string(d_model);
  if (n_head % n_kv_head != 0)
    return "model.n_kv_head = " + std::to_string(n_kv_head) + " must divide model.n_head = " + std::to_string(n_head) +
           " (each key/value head serves a whole group of query heads)";
  if (head_dim() % 2 != 0)
    return "model.d_model / model.n_head = " + std::to_string(head_dim()) +
           " is odd: RoPE rotates pairs, so the head dimension must be even";
  if (d_ff < 1) return "model.d_ff must be >= 1";
  if (vocab < 2) return "model.vocab must be >= 2";
  if (seq_len < 1) return "model.seq_len must be >= 1";
  if (!(rope_theta > 0.0)) return "model.rope_theta must be > 0";
  if (!(norm_eps > 0.0)) return "model.norm_eps must be > 0";
  if (rope_scaling.factor != 0.0 &&
      !(rope_scaling.factor > 0.0 && rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
        rope_scaling.low_freq_factor > 0.0 && rope_scaling.original_max_positions > 0))
    return "model.rope_scaling: factor and low_freq_factor must be > 0, high_freq_factor > low_freq_factor, "
           "original_max_positions > 0";
  return {};
}

// Hugging Face's _compute_llama3_parameters, step for step.
std::vector<float> LlamaConfig::rope_inverse_frequencies() const {
  if (rope_scaling.factor == 0.0) return {};
  const int half = head_dim() / 2;
  const auto factor = static_cast<float>(rope_scaling.factor);
  const auto low = static_cast<float>(rope_scaling.low_freq_factor);
  const auto high = static_cast<float>(rope_scaling.high_freq_factor);
  const auto original = static_cast<float>(rope_scaling.original_max_positions);
  const float low_freq_wavelength = original / low, high_freq_wavelength = original / high;
  std::vector<float> frequencies(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float frequency =
        1.0f / std::pow(static_cast<float>(rope_theta), static_cast<float>(2 * i) / static_cast<float>(head_dim()));
    const float wavelength = 2.0f * std::numbers::pi_v<float> / frequency;
    float scaled = wavelength > low_freq_wavelength ? frequency / factor : frequency;
    if (!(wavelength < high_freq_wavelength) && !(wavelength > low_freq_wavelength)) {
      const float smooth = (original / wavelength - low) / (high - low);
      scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
    }
    frequencies[static_cast<std::size_t>(i)] = scaled;
  }
  return frequencies;
}

}  // namespace strata
