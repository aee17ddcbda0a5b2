// One LLaMA block, forward and backward, through the backend's ops:
//   x -> norm1 = RMSNorm(x) -> q, k, v projections -> RoPE(q, k) -> attention -> atty
//     -> residual2 = x + o_proj(atty) -> norm2 = RMSNorm(residual2)
//     -> swiglu = silu(gate_proj(norm2)) * up_proj(norm2) -> output = residual2 + down_proj(swiglu)
#include <algorithm>
#include <stdexcept>

#include "core/model/llama/llama_model.hpp"

namespace strata {

void LlamaModel::load_input(int layer) {
  if (layer == 0 || input_staging_row_ < 0) return;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  const int row = activation_row(layer - 1, LA::output);
  ops().widen(store_.f32(input_staging_row_), store_.bf16(row), table().row(row).elements());
}

const float* LlamaModel::layer_input(int layer) const {
  if (layer == 0) return store_.f32(encoded_row_);
  if (input_staging_row_ >= 0) return store_.f32(input_staging_row_);  // load_input() fills it
  return store_.f32(activation_row(layer - 1, LA::output));
}

void LlamaModel::project_forward(int layer, LlamaParam weight, float* out, const float* inp, std::int64_t in_features,
                                 std::int64_t out_features) {
  auto timer = profiler_.scope(ProfileKind::matmul_forward);
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  adapted_matmul_forward(parameter(layer, weight), out, inp, nullptr,
                         MatmulShape{N, in_features, out_features, WeightLayout::out_in});
}

void LlamaModel::project_backward(int layer, LlamaParam weight, float* dinp, const float* dout, const float* inp,
                                  std::int64_t in_features, std::int64_t out_features, GradientWrite dinp_write) {
  auto timer = profiler_.scope(ProfileKind::matmul_backward);
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  const ParameterRows& rows = parameter(layer, weight);
  adapted_matmul_backward(rows, dinp, nullptr, dout, inp,
                          MatmulShape{N, in_features, out_features, WeightLayout::out_in}, dinp_write);
}

void LlamaModel::rope(float* x, std::int64_t stride, int heads, bool inverse) {
  auto timer = profiler_.scope(ProfileKind::rope);
  ops().rope(x, static_cast<std::int64_t>(batch_) * config_.seq_len, stride, config_.seq_len, heads, config_.head_dim(),
             static_cast<float>(config_.rope_theta), inverse);
}

AttentionInputs LlamaModel::attention_inputs(int l) const {
  return AttentionInputs{act(l, LA::q), act(l, LA::k), act(l, LA::v), config_.d_model, config_.kv_dim()};
}

// The cheap pieces, callable alone for cheap recomputation; each stores what it computed.
void LlamaModel::norm1_forward(int l) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  {
    auto timer = profiler_.scope(ProfileKind::rmsnorm_forward);
    ops().rmsnorm_forward(act(l, LA::norm1), act(l, LA::norm1_rstd), layer_input(l), gain(l, LlamaParam::input_norm), N,
                          config_.d_model, static_cast<float>(config_.norm_eps));
  }
  save_activation(l, LA::norm1);
}

void LlamaModel::norm2_forward(int l) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  {
    auto timer = profiler_.scope(ProfileKind::rmsnorm_forward);
    ops().rmsnorm_forward(act(l, LA::norm2), act(l, LA::norm2_rstd), act(l, LA::residual2),
                          gain(l, LlamaParam::post_attention_norm), N, config_.d_model,
                          static_cast<float>(config_.norm_eps));
  }
  save_activation(l, LA::norm2);
}

void LlamaModel::swiglu_forward(int l) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  {
    auto timer = profiler_.scope(ProfileKind::swiglu_forward);
    ops().swiglu_forward(act(l, LA::swiglu), act(l, LA::gate), act(l, LA::up), N * config_.d_ff);
  }
  save_activation(l, LA::swiglu);
}

std::vector<int> LlamaModel::cheap_activation_kinds() const {
  return {static_cast<int>(LA::norm1), static_cast<int>(LA::norm2), static_cast<int>(LA::swiglu)};
}

int LlamaModel::attention_saved_kind() const {
  return static_cast<int>(LA::attention_saved);
}

void LlamaModel::recompute_cheap_activations(int layer) {
  // RMSNorm rewrites its kept rstd with the same values: the same code on the same input.
  load_input(layer);
  norm1_forward(layer);
  load_activation(layer, LA::residual2);
  norm2_forward(layer);
  load_activation(layer, LA::gate);
  load_activation(layer, LA::up);
  swiglu_forward(layer);
}

// Writes atty again with the same values (the same kernel on the same q, k, v); under bf16 storage
// into its staging row, which the backward pass refills from the stored value before reading it.
void LlamaModel::recompute_attention(int layer) {
  load_activation(layer, LA::q);
  load_activation(layer, LA::k);
  load_activation(layer, LA::v);
  attention_forward(layer);
}

void LlamaModel::attention_forward(int l) {
  auto timer = profiler_.scope(ProfileKind::attention_forward);
  const Status status = attention_.attention_forward(
      attention_shape_, act(l, LA::atty), store_.f32(activation_row(l, LA::attention_saved)), attention_inputs(l));
  if (!status) throw std::runtime_error("attention kernel at layer " + std::to_string(l) + ": " + status.message());
}

void LlamaModel::layer_forward(int l) {
  using P = LlamaParam;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  const std::int64_t C = config_.d_model, KV = config_.kv_dim(), F = config_.d_ff;
  load_input(l);
  if (trainable_.skips(l)) {  // the identity: its output is its input
    ops().copy(act(l, LA::output), layer_input(l), static_cast<std::uint64_t>(N * C) * sizeof(float));
    save_activation(l, LA::output);
    return;
  }
  norm1_forward(l);
  project_forward(l, P::q_proj, act(l, LA::q), act(l, LA::norm1), C, C);
  project_forward(l, P::k_proj, act(l, LA::k), act(l, LA::norm1), C, KV);
  project_forward(l, P::v_proj, act(l, LA::v), act(l, LA::norm1), C, KV);
  rope(act(l, LA::q), C, config_.n_head, false);
  rope(act(l, LA::k), KV, config_.n_kv_head, false);
  save_activation(l, LA::q);
  save_activation(l, LA::k);
  save_activation(l, LA::v);
  attention_forward(l);
  save_activation(l, LA::atty);
  project_forward(l, P::o_proj, act(l, LA::residual2), act(l, LA::atty), C, C);
  {
    auto timer = profiler_.scope(ProfileKind::residual_forward);
    ops().residual_forward(act(l, LA::residual2), act(l, LA::residual2), layer_input(l), N * C);
  }
  save_activation(l, LA::residual2);
  norm2_forward(l);
  project_forward(l, P::gate_proj, act(l, LA::gate), act(l, LA::norm2), C, F);
  project_forward(l, P::up_proj, act(l, LA::up), act(l, LA::norm2), C, F);
  save_activation(l, LA::gate);
  save_activation(l, LA::up);
  swiglu_forward(l);
  project_forward(l, P::down_proj, act(l, LA::output), act(l, LA::swiglu), F, C);
  {
    auto timer = profiler_.scope(ProfileKind::residual_forward);
    ops().residual_forward(act(l, LA::output), act(l, LA::output), act(l, LA::residual2), N * C);
  }
  save_activation(l, LA::output);
}

void LlamaModel::layer_backward(int l) {
  using P = LlamaParam;
  using W = LlamaWorkspace;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  const std::int64_t C = config_.d_model, KV = config_.kv_dim(), F = config_.d_ff;
  constexpr auto overwrite = GradientWrite::overwrite;
  constexpr auto accumulate = GradientWrite::accumulate;
  if (trainable_.skips(l)) return;        // the identity passes d(output) through as d(input)
  float* d_residual = ws(W::d_residual);  // in: d(output); out: d(input)
  // MLP: output = down(swiglu) + residual2
  load_activation(l, LA::swiglu);
  project_backward(l, P::down_proj, ws(W::d_swiglu), d_residual, act(l, LA::swiglu), F, C, overwrite);
  load_activation(l, LA::gate);
  load_activation(l, LA::up);
  {
    auto timer = profiler_.scope(ProfileKind::swiglu_backward);
    ops().swiglu_backward(ws(W::d_gate), ws(W::d_up), ws(W::d_swiglu), act(l, LA::gate), act(l, LA::up), N * F,
                          overwrite);
  }
  load_activation(l, LA::norm2);
  project_backward(l, P::gate_proj, ws(W::d_norm), ws(W::d_gate), act(l, LA::norm2), C, F, overwrite);
  project_backward(l, P::up_proj, ws(W::d_norm), ws(W::d_up), act(l, LA::norm2), C, F, accumulate);
  load_activation(l, LA::residual2);
  {
    // The residual passes d(output) straight through, so the norm's input gradient adds onto it.
    auto timer = profiler_.scope(ProfileKind::rmsnorm_backward);
    ops().rmsnorm_backward(d_residual, grad(l, P::post_attention_norm), ws(W::d_norm), act(l, LA::residual2),
                           gain(l, P::post_attention_norm), act(l, LA::norm2_rstd), N, C);
  }
  // Attention: residual2 = o_proj(atty) + input
  load_activation(l, LA::atty);
  project_backward(l, P::o_proj, ws(W::d_atty), d_residual, act(l, LA::atty), C, C, overwrite);
  store_.zero(ws(W::d_q), N * C);  // the attention kernel accumulates (the SDK's contract)
  store_.zero(ws(W::d_k), N * KV);
  store_.zero(ws(W::d_v), N * KV);
  load_activation(l, LA::q);
  load_activation(l, LA::k);
  load_activation(l, LA::v);
  {
    auto timer = profiler_.scope(ProfileKind::attention_backward);
    const AttentionGrads grads{ws(W::d_q), ws(W::d_k), ws(W::d_v), C, KV};
    const Status status =
        attention_.attention_backward(attention_shape_, grads, ws(W::d_atty), act(l, LA::atty), attention_inputs(l),
                                      store_.f32(activation_row(l, LA::attention_saved)), ws(W::attention_scratch));
    if (!status) throw std::runtime_error("attention kernel at layer " + std::to_string(l) + ": " + status.message());
  }
  // RoPE is a rotation: its backward turns the gradients back.
  rope(ws(W::d_q), C, config_.n_head, true);
  rope(ws(W::d_k), KV, config_.n_kv_head, true);
  load_activation(l, LA::norm1);
  project_backward(l, P::q_proj, ws(W::d_norm), ws(W::d_q), act(l, LA::norm1), C, C, overwrite);
  project_backward(l, P::k_proj, ws(W::d_norm), ws(W::d_k), act(l, LA::norm1), C, KV, accumulate);
  project_backward(l, P::v_proj, ws(W::d_norm), ws(W::d_v), act(l, LA::norm1), C, KV, accumulate);
  load_input(l);
  auto timer = profiler_.scope(ProfileKind::rmsnorm_backward);
  ops().rmsnorm_backward(d_residual, grad(l, P::input_norm), ws(W::d_norm), layer_input(l), gain(l, P::input_norm),
                         act(l, LA::norm1_rstd), N, C);
}

}  // namespace strata
