// The ends of GPT-2: token and position embeddings, and the final LayerNorm before the tied LM
// head (core/model/lm_head.hpp runs the head and the loss chunk by chunk).
#include "core/model/gpt2/gpt2_model.hpp"

namespace strata {

namespace {}  // namespace

void GPT2Model::embed_forward() {
  auto timer = profiler_.scope(ProfileKind::embedding_forward);
  const auto& wte = parameters()[static_cast<std::size_t>(global_parameters_[0])];
  const auto& wpe = parameters()[static_cast<std::size_t>(global_parameters_[1])];
  ops().embedding_forward(store_.f32(encoded_row_), tokens(), store_.weight(wte.param), store_.weight(wpe.param),
                          batch_, config_.seq_len, config_.d_model);
}

void GPT2Model::embed_backward() {
  if (grad(GlobalParam::wte) == nullptr) return;  // frozen embeddings and head (wpe trains only with wte)
  auto timer = profiler_.scope(ProfileKind::embedding_backward);
  ops().embedding_backward(grad(GlobalParam::wte), grad(GlobalParam::wpe), ws(Workspace::d_residual), tokens(), batch_,
                           config_.seq_len, config_.d_model);
}

double GPT2Model::head_forward() {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  const int last = config_.n_layer - 1;
  load_activation(last, LayerActivation::output);
  {
    auto timer = profiler_.scope(ProfileKind::layernorm_forward);
    ops().layernorm_forward(store_.f32(lnf_row_), store_.f32(lnf_mean_row_), store_.f32(lnf_rstd_row_),
                            act(last, LayerActivation::output), param(GlobalParam::lnf_weight).f32(),
                            param(GlobalParam::lnf_bias).f32(), N, C, kLayerNormEps);
  }
  const int wte = parameters()[static_cast<std::size_t>(global_parameters_[0])].param;
  return head_.forward(store_.f32(lnf_row_), wte, targets());
}

void GPT2Model::head_backward(float dloss) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  const int last = config_.n_layer - 1;
  float* d_lnf = ws(Workspace::d_ln);
  const int wte = parameters()[static_cast<std::size_t>(global_parameters_[0])].param;
  head_.backward(dloss, d_lnf, grad(GlobalParam::wte), store_.f32(lnf_row_), wte, targets());
  store_.zero(ws(Workspace::d_residual), N * C);
  load_activation(last, LayerActivation::output);
  auto timer = profiler_.scope(ProfileKind::layernorm_backward);
  ops().layernorm_backward(ws(Workspace::d_residual), grad(GlobalParam::lnf_weight), grad(GlobalParam::lnf_bias), d_lnf,
                           act(last, LayerActivation::output), param(GlobalParam::lnf_weight).f32(),
                           store_.f32(lnf_mean_row_), store_.f32(lnf_rstd_row_), N, C);
}

}  // namespace strata
