// The final LayerNorm, the tied LM head and the loss, one vocabulary chunk at a time (see
// LogitsMode in gpt2_model.hpp).
#include <algorithm>
#include <stdexcept>

#include "core/model/gpt2_model.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/layernorm.hpp"

namespace strata {

void GPT2Model::set_logits_mode(LogitsMode mode) {
  const int row = global_activation_row(GlobalActivation::logits);
  if (allocated(row)) throw std::logic_error("the logits mode changes between micro batches only");
  logits_mode_ = mode;
  table_.row(row).shape.back() = mode == LogitsMode::keep ? config_.padded_vocab() : head_chunk_columns_;
}

float* GPT2Model::chunk_logits(std::int64_t first) {
  float* logits = global_act(GlobalActivation::logits);
  if (logits_mode_ == LogitsMode::recompute) return logits;
  // Chunk c starts after c full chunks of (B*T, head_chunk_columns_).
  return logits + static_cast<std::int64_t>(batch_) * config_.seq_len * first;
}

const float* GPT2Model::wte_chunk(std::int64_t first, std::int64_t width) {
  const int wte = global_param_rows_[static_cast<std::size_t>(GlobalParam::wte)];
  const std::int64_t C = config_.d_model;
  if (table_.row(wte).element != ElementType::bf16) return f(wte) + first * C;
  auto timer = profiler_.scope(ProfileKind::bf16_convert);
  cpu::widen(f(weight_scratch_row_), bf(wte) + first * C, width * C);
  return f(weight_scratch_row_);
}

void GPT2Model::chunk_logits_forward(float* logits, const float* wte, std::int64_t width) {
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len;
  auto timer = profiler_.scope(ProfileKind::lm_head_forward);
  cpu::matmul_forward(logits, global_act(GlobalActivation::lnf), wte, nullptr, N, config_.d_model, width,
                      cpu::WeightLayout::out_in);
}

double GPT2Model::head_forward() {
  using GA = GlobalActivation;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  const std::int64_t Vp = config_.padded_vocab();
  load(config_.n_layer - 1, LayerActivation::output);
  {
    auto timer = profiler_.scope(ProfileKind::layernorm_forward);
    cpu::layernorm_forward(global_act(GA::lnf), global_act(GA::lnf_mean), global_act(GA::lnf_rstd),
                           act(config_.n_layer - 1, LayerActivation::output), param(GlobalParam::lnf_weight).data(),
                           param(GlobalParam::lnf_bias).data(), N, C);
  }
  const auto* targets = reinterpret_cast<const std::int32_t*>(global_act(GA::targets));
  // The running max and sum live in the rows that end up holding log-sum-exp and the loss.
  float* running_max = global_act(GA::logsumexp);
  float* running_sum = global_act(GA::losses);
  for (std::int64_t first = 0; first < Vp; first += head_chunk_columns_) {
    const std::int64_t width = std::min(head_chunk_columns_, Vp - first);
    float* logits = chunk_logits(first);
    chunk_logits_forward(logits, wte_chunk(first, width), width);
    auto timer = profiler_.scope(ProfileKind::cross_entropy_forward);
    cpu::cross_entropy_forward_chunk(running_max, running_sum, global_act(GA::target_logits), logits, targets, N, first,
                                     width, config_.vocab);
  }
  cpu::cross_entropy_finish(global_act(GA::losses), global_act(GA::logsumexp), running_max, running_sum,
                            global_act(GA::target_logits), N);
  // In order, in double: the same sum for any thread count.
  double sum = 0.0;
  const float* losses = global_act(GA::losses);
  for (std::int64_t n = 0; n < N; ++n) sum += losses[n];
  return sum / static_cast<double>(N);
}

void GPT2Model::head_backward(float dloss) {
  using GA = GlobalActivation;
  const std::int64_t N = static_cast<std::int64_t>(batch_) * config_.seq_len, C = config_.d_model;
  const std::int64_t Vp = config_.padded_vocab();
  const auto* targets = reinterpret_cast<const std::int32_t*>(global_act(GA::targets));
  float* d_lnf = ws(Workspace::d_ln);
  for (std::int64_t first = 0; first < Vp; first += head_chunk_columns_) {
    const std::int64_t width = std::min(head_chunk_columns_, Vp - first);
    float* logits = chunk_logits(first);
    const float* wte = wte_chunk(first, width);
    if (logits_mode_ == LogitsMode::recompute) chunk_logits_forward(logits, wte, width);
    {
      auto timer = profiler_.scope(ProfileKind::cross_entropy_backward);
      // In place: the chunk's logits become its dlogits.
      cpu::cross_entropy_backward_chunk(logits, logits, global_act(GA::logsumexp), targets, dloss, N, first, width,
                                        config_.vocab);
    }
    auto timer = profiler_.scope(ProfileKind::lm_head_backward);
    // d_lnf sums over the chunks; each chunk's rows of dwte are its own.
    cpu::matmul_backward(d_lnf, grad(GlobalParam::wte) + first * C, nullptr, logits, global_act(GA::lnf), wte, N, C,
                         width, cpu::WeightLayout::out_in,
                         first == 0 ? cpu::GradientWrite::overwrite : cpu::GradientWrite::accumulate);
  }
  zero(ws(Workspace::d_residual), N * C);
  load(config_.n_layer - 1, LayerActivation::output);
  auto timer = profiler_.scope(ProfileKind::layernorm_backward);
  cpu::layernorm_backward(ws(Workspace::d_residual), grad(GlobalParam::lnf_weight), grad(GlobalParam::lnf_bias), d_lnf,
                          act(config_.n_layer - 1, LayerActivation::output), param(GlobalParam::lnf_weight).data(),
                          global_act(GA::lnf_mean), global_act(GA::lnf_rstd), N, C);
}

}  // namespace strata
