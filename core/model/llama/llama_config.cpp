#include "core/model/llama/llama_config.hpp"

#include <cmath>
#include <numbers>

namespace strata {

std::vector<AdapterTarget> llama_adapter_targets(const LlamaConfig& config) {
  const std::int64_t C = config.d_model, Q = config.q_dim(), KV = config.kv_dim(), F = config.d_ff;
  return {{"q", "self_attn.q_proj.weight", {0, C, Q, WeightLayout::out_in}},
          {"k", "self_attn.k_proj.weight", {0, C, KV, WeightLayout::out_in}},
          {"v", "self_attn.v_proj.weight", {0, C, KV, WeightLayout::out_in}},
          {"o", "self_attn.o_proj.weight", {0, Q, C, WeightLayout::out_in}},
          {"gate", "mlp.gate_proj.weight", {0, C, F, WeightLayout::out_in}},
          {"up", "mlp.up_proj.weight", {0, C, F, WeightLayout::out_in}},
          {"down", "mlp.down_proj.weight", {0, F, C, WeightLayout::out_in}}};
}

ModelInfo llama_info(const LlamaConfig& c, std::string_view arch, std::int64_t parameter_count) {
  return {
      arch,   c.n_layer,    c.n_head,         c.n_kv_head,      c.d_model,       c.vocab, c.seq_len, parameter_count,
      c.d_ff, c.head_dim(), c.padded_vocab(), c.sliding_window, c.tie_embeddings};
}

std::string validate_llama(const LlamaConfig& config) {
  const int n_layer = config.n_layer, n_head = config.n_head, n_kv_head = config.n_kv_head;
  const int d_model = config.d_model, d_ff = config.d_ff, vocab = config.vocab, seq_len = config.seq_len;
  const double rope_theta = config.rope_theta, norm_eps = config.norm_eps;
  const RopeScaling& rope_scaling = config.rope_scaling;
  const int head_dim = config.head_dim();
  if (n_layer < 1) return "model.n_layer must be >= 1";
  if (n_head < 1 || n_kv_head < 1) return "model.n_head and model.n_kv_head must be >= 1";
  if (config.own_head_dim < 0) return "model.head_dim must be >= 1";
  if (config.own_head_dim == 0 && d_model % n_head != 0)
    return "model.n_head = " + std::to_string(n_head) + " must divide model.d_model = " + std::to_string(d_model);
  if (n_head % n_kv_head != 0)
    return "model.n_kv_head = " + std::to_string(n_kv_head) + " must divide model.n_head = " + std::to_string(n_head) +
           " (each key/value head serves a whole group of query heads)";
  if (head_dim % 2 != 0)
    return (config.own_head_dim > 0 ? "model.head_dim = " : "model.d_model / model.n_head = ") +
           std::to_string(head_dim) + " is odd: RoPE rotates pairs, so the head dimension must be even";
  if (d_ff < 1) return "model.d_ff must be >= 1";
  if (vocab < 2) return "model.vocab must be >= 2";
  if (seq_len < 1) return "model.seq_len must be >= 1";
  if (config.sliding_window < 0) return "model.sliding_window must be >= 0";
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
std::vector<float> rope_inverse_frequencies(const LlamaConfig& config) {
  const RopeScaling& rope_scaling = config.rope_scaling;
  if (rope_scaling.factor == 0.0) return {};
  const int head_dim = config.head_dim();
  const int half = head_dim / 2;
  const auto factor = static_cast<float>(rope_scaling.factor);
  const auto low = static_cast<float>(rope_scaling.low_freq_factor);
  const auto high = static_cast<float>(rope_scaling.high_freq_factor);
  const auto original = static_cast<float>(rope_scaling.original_max_positions);
  const float low_freq_wavelength = original / low, high_freq_wavelength = original / high;
  std::vector<float> frequencies(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float frequency = 1.0f / std::pow(static_cast<float>(config.rope_theta),
                                            static_cast<float>(2 * i) / static_cast<float>(head_dim));
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
