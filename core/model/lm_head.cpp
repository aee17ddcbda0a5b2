#include "core/model/lm_head.hpp"

#include <algorithm>
#include <stdexcept>

namespace strata {

std::int64_t LmHead::chunk_columns(std::int64_t channels, std::int64_t padded_vocab) {
  return std::clamp<std::int64_t>(kWeightScratchElements / channels / 64 * 64, 64, padded_vocab);
}

void LmHead::declare(const LmHeadShape& shape, const LmHeadRows& rows) {
  shape_ = shape;
  rows_ = rows;
  chunk_columns_ = chunk_columns(shape.channels, shape.padded_vocab);
  set_logits_mode(mode_);
}

void LmHead::set_logits_mode(LogitsMode mode) {
  if (store_.residency().allocated(rows_.logits))
    throw std::logic_error("the logits mode changes between micro batches only");
  mode_ = mode;
  TensorRow& logits = store_.table().row(rows_.logits);
  logits.shape.back() = mode == LogitsMode::keep ? shape_.padded_vocab : chunk_columns_;
  // What would make the logits fit, for the memory limit's message.
  logits.remedy = mode == LogitsMode::keep
                      ? "They are the LM head's logits, every vocabulary chunk kept for the backward pass: "
                        "`logits = \"recompute\"` in a [[strategy]] plugin = \"checkpoint\" keeps one chunk instead"
                      : "They are one vocabulary chunk of the LM head's logits, all it keeps: more micro_batches "
                        "(fewer rows at a time) make it smaller";
}

float* LmHead::chunk_logits(std::int64_t first) {
  float* logits = store_.f32(rows_.logits);
  if (mode_ == LogitsMode::recompute) return logits;
  // Chunk c starts after c full chunks of (N, chunk_columns_).
  return logits + shape_.rows * first;
}

HeadOperand LmHead::head_columns(int weight_row, std::int64_t first) {
  const Weight weight = store_.weight(weight_row);
  const std::int64_t C = shape_.channels;
  if (weight.dtype != DType::bf16) return {{store_.f32(weight_row) + first * C, DType::f32}, Scratch{}};
  return {{store_.bf16(weight_row) + first * C, DType::bf16},
          Scratch{store_.f32(rows_.weight_scratch), rows_.weight_scratch_elements}};
}

Weight LmHead::widened_columns(int weight_row, std::int64_t first, std::int64_t width) {
  const HeadOperand head = head_columns(weight_row, first);
  if (head.weight.dtype != DType::bf16) return head.weight;
  auto timer = store_.profiler().scope(ProfileKind::bf16_convert);
  store_.ops().widen(head.scratch.data, static_cast<const std::uint16_t*>(head.weight.data), width * shape_.channels);
  return {head.scratch.data, DType::f32};
}

const std::uint16_t* LmHead::narrowed_hidden(const float* hidden, int weight_row) {
  if (rows_.hidden_bf16 < 0 || store_.weight(weight_row).dtype != DType::bf16) return nullptr;
  auto timer = store_.profiler().scope(ProfileKind::bf16_convert);
  std::uint16_t* narrowed = store_.bf16(rows_.hidden_bf16);
  store_.ops().narrow(narrowed, hidden, shape_.rows * shape_.channels);
  return narrowed;
}

void LmHead::chunk_logits_forward(float* logits, const float* hidden, const std::uint16_t* hidden_bf16,
                                  const HeadOperand& head, std::int64_t width, std::int64_t rows) {
  auto timer = store_.profiler().scope(ProfileKind::lm_head_forward);
  const MatmulShape shape{rows, shape_.channels, width, WeightLayout::out_in};
  if (hidden_bf16 != nullptr)
    store_.ops().matmul_forward_bf16_input(logits, hidden_bf16, head.weight, nullptr, shape);
  else
    store_.ops().matmul_forward(logits, hidden, head.weight, nullptr, shape, head.scratch);
}

std::vector<float> LmHead::row_logits(const float* hidden_row, int weight_row) {
  // Chunk by chunk through the logits row's first chunk of room (either logits mode has it).
  float* logits = store_.f32(rows_.logits);
  std::vector<float> host(static_cast<std::size_t>(shape_.vocab));
  for (std::int64_t first = 0; first < shape_.vocab; first += chunk_columns_) {
    const std::int64_t width = std::min(chunk_columns_, shape_.padded_vocab - first);
    chunk_logits_forward(logits, hidden_row, nullptr, {widened_columns(weight_row, first, width), Scratch{}}, width, 1);
    const std::int64_t kept = std::min(width, shape_.vocab - first);  // padding columns are not logits
    store_.ops().copy_to_host(host.data() + first, logits, static_cast<std::uint64_t>(kept) * sizeof(float));
  }
  return host;
}

double LmHead::forward(const float* hidden, int weight_row, const std::int32_t* targets) {
  Ops& ops = store_.ops();
  const std::int64_t N = shape_.rows, Vp = shape_.padded_vocab;
  // The running max and sum live in the rows that end up holding log-sum-exp and the loss.
  float* running_max = store_.f32(rows_.logsumexp);
  float* running_sum = store_.f32(rows_.losses);
  float* target_logits = store_.f32(rows_.target_logits);
  const std::uint16_t* hidden_bf16 = narrowed_hidden(hidden, weight_row);
  for (std::int64_t first = 0; first < Vp; first += chunk_columns_) {
    const std::int64_t width = std::min(chunk_columns_, Vp - first);
    float* logits = chunk_logits(first);
    chunk_logits_forward(logits, hidden, hidden_bf16, head_columns(weight_row, first), width, N);
    auto timer = store_.profiler().scope(ProfileKind::cross_entropy_forward);
    ops.cross_entropy_forward_chunk(running_max, running_sum, target_logits, logits, targets, N, first, width,
                                    shape_.vocab);
  }
  ops.cross_entropy_finish(store_.f32(rows_.losses), store_.f32(rows_.logsumexp), running_max, running_sum,
                           target_logits, targets, N);
  // In order, in double: the same sum for any thread count.
  return ops.sum(store_.f32(rows_.losses), N) / static_cast<double>(N);
}

void LmHead::backward(float dloss, float* d_hidden, float* dweight, const float* hidden, int weight_row,
                      const std::int32_t* targets) {
  Ops& ops = store_.ops();
  const std::int64_t N = shape_.rows, C = shape_.channels, Vp = shape_.padded_vocab;
  const std::uint16_t* hidden_bf16 = narrowed_hidden(hidden, weight_row);  // again: the row may be another pass's
  for (std::int64_t first = 0; first < Vp; first += chunk_columns_) {
    const std::int64_t width = std::min(chunk_columns_, Vp - first);
    float* logits = chunk_logits(first);
    const HeadOperand head = head_columns(weight_row, first);
    if (mode_ == LogitsMode::recompute) chunk_logits_forward(logits, hidden, hidden_bf16, head, width, N);
    {
      auto timer = store_.profiler().scope(ProfileKind::cross_entropy_backward);
      // In place: the chunk's logits become its dlogits.
      ops.cross_entropy_backward_chunk(logits, logits, store_.f32(rows_.logsumexp), targets, dloss, N, first, width,
                                       shape_.vocab);
    }
    auto timer = store_.profiler().scope(ProfileKind::lm_head_backward);
    // d_hidden sums over the chunks; each chunk's rows of dweight (null: a frozen head) are its own.
    float* dweight_rows = dweight != nullptr ? dweight + first * C : nullptr;
    const MatmulShape shape{N, C, width, WeightLayout::out_in};
    const GradientWrite write = first == 0 ? GradientWrite::overwrite : GradientWrite::accumulate;
    if (hidden_bf16 != nullptr)
      ops.matmul_backward_bf16_input(d_hidden, dweight_rows, nullptr, logits, hidden_bf16, head.weight, shape, write);
    else
      ops.matmul_backward(d_hidden, dweight_rows, nullptr, logits, hidden, head.weight, shape, head.scratch, write);
  }
}

}  // namespace strata
