// The ends of LLaMA: the token embedding (no position table: RoPE carries positions) and the
// final RMSNorm before the LM head (core/model/lm_head.hpp runs the head and the loss).
#include "core/model/llama/llama_model.hpp"

namespace strata {

void LlamaModel::embed_forward() {
  auto timer = profiler_.scope(ProfileKind::embedding_forward);
  const ParameterRows& embed = parameters()[static_cast<std::size_t>(embed_)];
  ops().embedding_forward(store_.f32(encoded_row_), tokens(), store_.weight(embed.param), Weight{}, batch_,
                          config_.seq_len, config_.d_model);
}

void LlamaModel::embed_backward() {
  const ParameterRows& embed = parameters()[static_cast<std::size_t>(embed_)];
  if (grad_of(embed) == nullptr) return;  // frozen
  auto timer = profiler_.scope(ProfileKind::embedding_backward);
  ops().embedding_backward(grad_of(embed), nullptr, ws(LlamaWorkspace::d_residual), tokens(), batch_, config_.seq_len,
                           config_.d_model);
}

double LlamaModel::head_forward() {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  const int last = config_.n_layer - 1;
  load_activation(last, LA::output);
  {
    auto timer = profiler_.scope(ProfileKind::rmsnorm_forward);
    const ParameterRows& norm = parameters()[static_cast<std::size_t>(norm_)];
    ops().rmsnorm_forward(store_.f32(final_norm_row_), store_.f32(final_rstd_row_), act(last, LA::output),
                          store_.values(norm).f32(), N, config_.d_model, static_cast<float>(config_.norm_eps));
  }
  return head_.forward(store_.f32(final_norm_row_), head_weight_row(), targets());
}

void LlamaModel::head_backward(float dloss) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  const int last = config_.n_layer - 1;
  float* d_hidden = ws(LlamaWorkspace::d_norm);
  const ParameterRows& head = parameters()[static_cast<std::size_t>(lm_head_)];
  // Tied: the head's gradient adds onto the embedding's, which embed_backward adds to as well.
  head_.backward(dloss, d_hidden, grad_of(head), store_.f32(final_norm_row_), head_weight_row(), targets());
  store_.zero(ws(LlamaWorkspace::d_residual), N * C);
  load_activation(last, LA::output);
  auto timer = profiler_.scope(ProfileKind::rmsnorm_backward);
  const ParameterRows& norm = parameters()[static_cast<std::size_t>(norm_)];
  ops().rmsnorm_backward(ws(LlamaWorkspace::d_residual), norm_grad_of(norm), d_hidden, act(last, LA::output),
                         store_.values(norm).f32(), store_.f32(final_rstd_row_), N, C);
}

}  // namespace strata
