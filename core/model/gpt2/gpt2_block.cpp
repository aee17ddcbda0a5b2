// GPT-2's math: the embedding, one block forward and backward, and the final LayerNorm before
// the tied LM head (core/model/lm_head.hpp). One op per line; shapes for N = B*T rows of C.
// Recomputation (what the checkpoint strategy dropped) sits right above the code that reads it.
#include "core/model/gpt2/gpt2_model.hpp"

namespace strata {

using namespace gpt2;

void GPT2Model::embed_forward() {
  auto timer = profiler_.scope(ProfileKind::embedding_forward);
  // encoded (B, T, C) = wte[tokens] + wpe[t] (decoding: T new positions from the first one)
  ops().embedding_forward(global_activation(GA::encoded), tokens(), store_.weight(global(G::wte).param),
                          position_table(store_.weight(global(G::wpe).param)), batch_, positions(), config_.d_model);
}

AttentionInputs GPT2Model::qkv(int l) {
  const std::int64_t C = config_.d_model;
  const float* packed = in(l, A::qkv);
  return AttentionInputs{packed, packed + C, packed + 2 * C, 3 * C, 3 * C};
}

void GPT2Model::block_forward(int l) {
  const float eps = kLayerNormEps;
  // ln1 (N, C) = layernorm(x)
  layernorm(l, A::ln1, A::ln1_mean, A::ln1_rstd, kBlockInput, P::ln1_weight, P::ln1_bias, eps);
  // qkv (N, 3C) = ln1 @ W_qkv + b
  linear(l, A::qkv, A::ln1, P::qkv_weight, P::qkv_bias);
  // atty (N, C) = causal softmax(q k^T / sqrt(hd)) v, per head
  attention(l, A::atty, A::attention_saved, qkv(l));
  // residual2 (N, C) = x + atty @ W_proj + b
  linear(l, A::residual2, A::atty, P::attn_proj_weight, P::attn_proj_bias);
  residual(l, A::residual2, kBlockInput);
  // ln2 (N, C) = layernorm(residual2)
  layernorm(l, A::ln2, A::ln2_mean, A::ln2_rstd, A::residual2, P::ln2_weight, P::ln2_bias, eps);
  // fch (N, 4C) = ln2 @ W_fc + b;  fch_gelu = gelu(fch)
  linear(l, A::fch, A::ln2, P::fc_weight, P::fc_bias);
  gelu(l, A::fch_gelu, A::fch);
  // output (N, C) = residual2 + fch_gelu @ W_fc_proj + b
  linear(l, A::output, A::fch_gelu, P::fc_proj_weight, P::fc_proj_bias);
  residual(l, A::output, A::residual2);
}

// d_residual holds d(output) on entry and d(input) on return; the residual stream passes its
// gradient straight through, so each norm's input gradient adds onto it.
void GPT2Model::block_backward(int l) {
  constexpr auto overwrite = GradientWrite::overwrite;
  float* d_residual = ws(W::d_residual);
  // MLP: output = fch_gelu @ W_fc_proj + b + residual2
  if (recompute(l, A::fch_gelu)) gelu(l, A::fch_gelu, A::fch);
  linear_backward(l, ws(W::d_fch_gelu), overwrite, d_residual, A::fch_gelu, P::fc_proj_weight, P::fc_proj_bias);
  gelu_backward(l, ws(W::d_fch), ws(W::d_fch_gelu), A::fch);
  if (recompute(l, A::ln2))
    layernorm(l, A::ln2, A::ln2_mean, A::ln2_rstd, A::residual2, P::ln2_weight, P::ln2_bias, kLayerNormEps);
  linear_backward(l, ws(W::d_ln), overwrite, ws(W::d_fch), A::ln2, P::fc_weight, P::fc_bias);
  layernorm_backward(l, d_residual, ws(W::d_ln), A::residual2, P::ln2_weight, P::ln2_bias, A::ln2_mean, A::ln2_rstd);
  // Attention: residual2 = atty @ W_proj + b + x
  linear_backward(l, ws(W::d_atty), overwrite, d_residual, A::atty, P::attn_proj_weight, P::attn_proj_bias);
  if (recompute(l, A::attention_saved)) attention(l, A::atty, A::attention_saved, qkv(l));
  zero(W::d_qkv);  // the attention kernel accumulates (the SDK's contract)
  const std::int64_t C = config_.d_model;
  float* d_qkv = ws(W::d_qkv);
  attention_backward(l, AttentionGrads{d_qkv, d_qkv + C, d_qkv + 2 * C, 3 * C, 3 * C}, ws(W::d_atty), A::atty,
                     A::attention_saved, qkv(l));
  if (recompute(l, A::ln1))
    layernorm(l, A::ln1, A::ln1_mean, A::ln1_rstd, kBlockInput, P::ln1_weight, P::ln1_bias, kLayerNormEps);
  linear_backward(l, ws(W::d_ln), overwrite, d_qkv, A::ln1, P::qkv_weight, P::qkv_bias);
  layernorm_backward(l, d_residual, ws(W::d_ln), kBlockInput, P::ln1_weight, P::ln1_bias, A::ln1_mean, A::ln1_rstd);
}

const float* GPT2Model::final_norm() {
  const std::int64_t N = rows(), C = config_.d_model;
  const float* x = in(config_.n_layer - 1, A::output);
  auto timer = profiler_.scope(ProfileKind::layernorm_forward);
  // lnf (N, C) = layernorm(x); the head reads it: logits = lnf @ wte^T
  ops().layernorm_forward(global_activation(GA::lnf), global_activation(GA::lnf_mean), global_activation(GA::lnf_rstd),
                          x, global_value(G::lnf_weight), global_value(G::lnf_bias), N, C, kLayerNormEps);
  return global_activation(GA::lnf);
}

void GPT2Model::final_backward(float dloss) {
  const std::int64_t N = rows(), C = config_.d_model;
  float* d_lnf = ws(W::d_ln);
  head_.backward(dloss, d_lnf, global_grad(G::wte), global_activation(GA::lnf), global(G::wte).param, targets());
  zero(W::d_residual);
  const float* x = in(config_.n_layer - 1, A::output);
  auto timer = profiler_.scope(ProfileKind::layernorm_backward);
  ops().layernorm_backward(ws(W::d_residual), global_grad(G::lnf_weight), global_grad(G::lnf_bias), d_lnf, x,
                           global_value(G::lnf_weight), global_activation(GA::lnf_mean),
                           global_activation(GA::lnf_rstd), N, C);
}

void GPT2Model::embed_backward() {
  if (global_grad(G::wte) == nullptr) return;  // frozen embeddings and head (wpe trains only with wte)
  auto timer = profiler_.scope(ProfileKind::embedding_backward);
  ops().embedding_backward(global_grad(G::wte), global_grad(G::wpe), ws(W::d_residual), tokens(), batch_,
                           config_.seq_len, config_.d_model);
}

}  // namespace strata
