// LLaMA's math: the embedding (no position table: RoPE carries positions), one block forward and
// backward, and the final RMSNorm before the LM head (core/model/lm_head.hpp). One op per line;
// shapes for N = B*T rows, C = d_model, Q = n_head * head_dim (C unless the family sets head_dim),
// KV = n_kv_head * head_dim, F = d_ff. Recomputation (what the checkpoint strategy dropped) sits
// right above the code that reads it. LlamaMath's options (a norm gain's offset, the embedding's
// scale, GeGLU for SwiGLU) are Gemma's; each is an argument of the op it changes.
#include "core/model/llama/llama_model.hpp"

namespace strata {

using namespace llama;

void LlamaModel::embed_forward() {
  auto timer = profiler_.scope(ProfileKind::embedding_forward);
  // encoded (B, T, C) = embedding_scale * embed_tokens[tokens]
  op::EmbeddingForward embedding{global_activation(GA::encoded),
                                 tokens(),
                                 store_.weight(global(G::embed).param),
                                 Weight{},
                                 batch_,
                                 positions(),
                                 config_.d_model};
  embedding.scale = math_.embedding_scale;
  ops().run(embedding);
}

AttentionInputs LlamaModel::qkv(int l) {
  return AttentionInputs{in(l, A::q), in(l, A::k), in(l, A::v), config_.q_dim(), config_.kv_dim()};
}

void LlamaModel::block_forward(int l) {
  // norm1 (N, C) = rmsnorm(x)
  rmsnorm(l, A::norm1, A::norm1_rstd, kBlockInput, P::input_norm);
  // q (N, Q), k and v (N, KV) = norm1 @ W^T (+ b)
  linear(l, A::q, A::norm1, P::q_proj, bias(P::q_bias));
  linear(l, A::k, A::norm1, P::k_proj, bias(P::k_bias));
  linear(l, A::v, A::norm1, P::v_proj, bias(P::v_bias));
  // q, k turned by position (rotate_half)
  rope(l, A::q, config_.n_head);
  rope(l, A::k, config_.n_kv_head);
  // atty (N, Q) = causal softmax(q k^T / sqrt(hd)) v; query head h reads kv head h / (n_head / n_kv_head)
  attention(l, A::atty, A::attention_saved, qkv(l));
  // residual2 (N, C) = x + atty @ W_o^T
  linear(l, A::residual2, A::atty, P::o_proj);
  residual(l, A::residual2, kBlockInput);
  // norm2 (N, C) = rmsnorm(residual2)
  rmsnorm(l, A::norm2, A::norm2_rstd, A::residual2, P::post_attention_norm);
  // gate, up (N, F) = norm2 @ W^T;  swiglu = silu(gate) * up (GeGLU: gelu_tanh(gate) * up)
  linear(l, A::gate, A::norm2, P::gate_proj);
  linear(l, A::up, A::norm2, P::up_proj);
  gated(l);
  // output (N, C) = residual2 + swiglu @ W_down^T
  linear(l, A::output, A::swiglu, P::down_proj);
  residual(l, A::output, A::residual2);
}

// d_residual holds d(output) on entry and d(input) on return; the residual stream passes its
// gradient straight through, so each norm's input gradient adds onto it.
void LlamaModel::block_backward(int l) {
  constexpr auto overwrite = GradientWrite::overwrite;
  constexpr auto accumulate = GradientWrite::accumulate;
  float* d_residual = ws(W::d_residual);
  // MLP: output = swiglu @ W_down^T + residual2
  if (recompute(l, A::swiglu)) gated(l);
  linear_backward(l, ws(W::d_swiglu), overwrite, d_residual, A::swiglu, P::down_proj);
  gated_backward(l, ws(W::d_gate), ws(W::d_up), ws(W::d_swiglu));
  if (recompute(l, A::norm2)) rmsnorm(l, A::norm2, A::norm2_rstd, A::residual2, P::post_attention_norm);
  linear_backward(l, ws(W::d_norm), overwrite, ws(W::d_gate), A::norm2, P::gate_proj);
  linear_backward(l, ws(W::d_norm), accumulate, ws(W::d_up), A::norm2, P::up_proj);
  rmsnorm_backward(l, d_residual, ws(W::d_norm), A::residual2, P::post_attention_norm, A::norm2_rstd);
  // Attention: residual2 = atty @ W_o^T + x
  linear_backward(l, ws(W::d_atty), overwrite, d_residual, A::atty, P::o_proj);
  if (recompute(l, A::attention_saved)) attention(l, A::atty, A::attention_saved, qkv(l));
  zero(W::d_q);  // the attention kernel accumulates (the SDK's contract)
  zero(W::d_k);
  zero(W::d_v);
  const std::int64_t Q = config_.q_dim(), KV = config_.kv_dim();
  attention_backward(l, AttentionGrads{ws(W::d_q), ws(W::d_k), ws(W::d_v), Q, KV}, ws(W::d_atty), A::atty,
                     A::attention_saved, qkv(l));
  // RoPE is a rotation: its backward turns the gradients back.
  rope_backward(ws(W::d_q), Q, config_.n_head);
  rope_backward(ws(W::d_k), KV, config_.n_kv_head);
  if (recompute(l, A::norm1)) rmsnorm(l, A::norm1, A::norm1_rstd, kBlockInput, P::input_norm);
  linear_backward(l, ws(W::d_norm), overwrite, ws(W::d_q), A::norm1, P::q_proj, bias(P::q_bias));
  linear_backward(l, ws(W::d_norm), accumulate, ws(W::d_k), A::norm1, P::k_proj, bias(P::k_bias));
  linear_backward(l, ws(W::d_norm), accumulate, ws(W::d_v), A::norm1, P::v_proj, bias(P::v_bias));
  rmsnorm_backward(l, d_residual, ws(W::d_norm), kBlockInput, P::input_norm, A::norm1_rstd);
}

const float* LlamaModel::final_norm() {
  const std::int64_t N = rows(), C = config_.d_model;
  const float* x = in(config_.n_layer - 1, A::output);
  auto timer = profiler_.scope(ProfileKind::rmsnorm_forward);
  // final_norm (N, C) = rmsnorm(x); the head reads it: logits = final_norm @ lm_head^T
  ops().rmsnorm_forward(global_activation(GA::final_norm), global_activation(GA::final_rstd), x, global_value(G::norm),
                        N, C, static_cast<float>(config_.norm_eps), math_.norm_weight_offset);
  return global_activation(GA::final_norm);
}

void LlamaModel::final_backward(float dloss) {
  const std::int64_t N = rows(), C = config_.d_model;
  float* d_hidden = ws(W::d_norm);
  // Tied: the head's gradient adds onto the embedding's, which embed_backward adds to as well.
  head_.backward(dloss, d_hidden, global_grad(G::lm_head), global_activation(GA::final_norm), global(G::lm_head).param,
                 targets());
  zero(W::d_residual);
  const float* x = in(config_.n_layer - 1, A::output);
  auto timer = profiler_.scope(ProfileKind::rmsnorm_backward);
  ops().rmsnorm_backward(ws(W::d_residual), global_grad(G::norm), d_hidden, x, global_value(G::norm),
                         global_activation(GA::final_rstd), N, C, math_.norm_weight_offset);
}

void LlamaModel::embed_backward() {
  if (global_grad(G::embed) == nullptr) return;  // frozen
  auto timer = profiler_.scope(ProfileKind::embedding_backward);
  op::EmbeddingBackward embedding{global_grad(G::embed), nullptr,        ws(W::d_residual), tokens(), batch_,
                                  config_.seq_len,       config_.d_model};
  embedding.scale = math_.embedding_scale;
  ops().run(embedding);
}

}  // namespace strata
