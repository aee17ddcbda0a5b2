#pragma once
// The LM head and its loss, one vocabulary chunk at a time, shared by every family: logits =
// hidden (N, C) @ W^T for a (padded_vocab, C) head weight (tied wte, or an untied lm_head), then
// chunked cross-entropy, so the logits need not exist all at once. A bf16 head weight goes to the
// matmul op as stored, with the weight scratch, as the blocks' bf16 matrices do: the CPU widens each
// chunk there and runs the f32 product, a GPU runs bf16 operands on its tensor cores (f32
// accumulation), on the hidden state narrowed once where the backend takes bf16 inputs. Decoding's
// one-position logits widen the chunk first (the CPU's matrix-vector path).
//
// LogitsMode: `keep` stores every chunk's logits from the forward pass for the backward
// (chunk-major: chunk c is an (N, width) block); `recompute` keeps one chunk's room and
// recomputes each chunk in the backward pass, one extra head matmul for N*padded_vocab fewer
// floats. The arithmetic is the same either way, so the results are bitwise equal.
#include <cstdint>
#include <vector>

#include "core/tensor/tensor_store.hpp"

namespace strata {

enum class LogitsMode : std::uint8_t { keep, recompute };

// The widest chunk of a bf16 weight widened at once: 4 MiB of f32, enough for sgemm to run at speed.
inline constexpr std::int64_t kWeightScratchElements = std::int64_t{1} << 20;

struct LmHeadRows {
  int logits = -1;  // global activations, per micro batch
  int losses = -1;
  int logsumexp = -1;
  int target_logits = -1;
  int weight_scratch = -1;  // f32 workspace of weight_scratch_elements, or -1 when no weight is bf16
  int hidden_bf16 = -1;     // the hidden state in bf16 (a global activation), or -1: see narrowed_hidden
  std::int64_t weight_scratch_elements = 0;
};

// A chunk of the head weight as a matmul operand, with the scratch a bf16 one is widened in.
struct HeadOperand {
  Weight weight;
  Scratch scratch;
};

struct LmHeadShape {
  std::int64_t rows = 0;  // N = batch * seq_len
  std::int64_t channels = 0;
  std::int64_t vocab = 0;
  std::int64_t padded_vocab = 0;
};

class LmHead {
 public:
  explicit LmHead(TensorStore& store) : store_(store) {}
  // Columns per chunk: about kWeightScratchElements of the weight, a multiple of 64.
  static std::int64_t chunk_columns(std::int64_t channels, std::int64_t padded_vocab);

  void declare(const LmHeadShape& shape, const LmHeadRows& rows);
  void set_logits_mode(LogitsMode mode);
  int losses_row() const noexcept { return rows_.losses; }

  // Mean cross-entropy over the N positions.
  double forward(const float* hidden, int weight_row, const std::int32_t* targets);
  // The logits of one position (`hidden_row`, C floats), the first `vocab` copied to the host:
  // what decoding samples from. Computed a chunk at a time in the logits row.
  std::vector<float> row_logits(const float* hidden_row, int weight_row);
  // d_hidden is overwritten; dweight (the head weight's gradient) accumulates chunk by chunk.
  void backward(float dloss, float* d_hidden, float* dweight, const float* hidden, int weight_row,
                const std::int32_t* targets);

 private:
  float* chunk_logits(std::int64_t first);
  // Rows [first, first + width) of the head weight (its logits' columns): as stored, or widened to f32.
  HeadOperand head_columns(int weight_row, std::int64_t first);
  Weight widened_columns(int weight_row, std::int64_t first, std::int64_t width);
  // The hidden state narrowed to bf16 once, for the bf16-input matmuls of every chunk (the same
  // bits as the matmuls' own narrowing), where the head weight is bf16 and the backend has them
  // (rows_.hidden_bf16); null otherwise.
  const std::uint16_t* narrowed_hidden(const float* hidden, int weight_row);
  void chunk_logits_forward(float* logits, const float* hidden, const std::uint16_t* hidden_bf16,
                            const HeadOperand& head, std::int64_t width, std::int64_t rows);

  TensorStore& store_;
  LmHeadShape shape_;
  LmHeadRows rows_;
  LogitsMode mode_ = LogitsMode::keep;
  std::int64_t chunk_columns_ = 0;
};

}  // namespace strata
