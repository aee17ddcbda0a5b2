#pragma once
// Train and validation tokens and the batches drawn from them.
//
// Training batches are random windows chosen by a counter-based hash of (seed, step, micro batch,
// row): no generator state to carry, so a resumed run draws exactly the batches the uninterrupted
// run would. Evaluation uses consecutive non-overlapping windows of seq_len+1 tokens from the start.
// A target its token file's loss mask leaves out is kNoTarget (core/data/loss_mask.hpp).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/data/token_sequence.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata {

// A position without a target: no loss and no gradient (the cross-entropy ops' negative target).
inline constexpr std::int32_t kNoTarget = -1;

// The positions of `targets` that have one.
std::int64_t target_count(std::span<const std::int32_t> targets) noexcept;

struct DataOptions {
  std::filesystem::path train;
  std::optional<std::filesystem::path> val;  // default: the last val_fraction of train
  double val_fraction = 0.1;
  int vocab = 256;
  int seq_len = 64;
  int batch = 8;  // micro-batch rows
  // Tokenizes .txt and .jsonl data (core/data/corpus_tokens.hpp); null: text is bytes. Used while
  // the Dataset is built only.
  const Tokenizer* tokenizer = nullptr;
};

class Dataset {
 public:
  explicit Dataset(const DataOptions& options);

  std::int64_t train_tokens() const noexcept { return static_cast<std::int64_t>(train_.size()); }
  std::int64_t val_tokens() const noexcept { return static_cast<std::int64_t>(val_.size()); }
  // Whether the training tokens have a loss mask (then some targets may be kNoTarget).
  bool loss_masked() const noexcept { return train_.has_loss_mask() || val_.has_loss_mask(); }
  // The training tokens that are targets (all without a mask).
  std::int64_t train_targets() const noexcept;
  // What a save records of the masks (core/data/loss_mask.hpp): the hash of every byte of the
  // training and validation masks, "" without one.
  std::string loss_mask_identity() const;

  // (batch, seq_len) inputs and targets for one micro batch of one step.
  void train_batch(std::uint64_t seed, std::int64_t step, int micro_batch, std::int32_t* inputs,
                   std::int32_t* targets) const;

  // Evaluation windows of the validation tokens; window i is tokens [i(T+1), (i+1)(T+1)).
  std::int64_t val_windows() const noexcept;
  void val_window(std::int64_t window, std::int32_t* inputs, std::int32_t* targets) const;

 private:
  DataOptions options_;
  TokenSequence train_;
  TokenSequence val_;
};

// Windows over any token sequence, as `strata eval --data FILE` uses them.
std::int64_t window_count(const TokenSequence& tokens, int seq_len);
void window_at(const TokenSequence& tokens, int seq_len, std::int64_t window, std::int32_t* inputs,
               std::int32_t* targets);

}  // namespace strata
