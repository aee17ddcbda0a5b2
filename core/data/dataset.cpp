#include "core/data/dataset.hpp"

#include <cstdio>
#include <string>

#include "core/data/corpus_tokens.hpp"
#include "core/data/token_file.hpp"
#include "core/errors/data_error.hpp"
#include "core/util/random.hpp"

namespace strata {

Dataset::Dataset(const DataOptions& options) : options_(options) {
  TokenSequence all = load_corpus_tokens(options.train, options.vocab, options.tokenizer);
  if (options.val) {
    train_ = std::move(all);
    val_ = load_corpus_tokens(*options.val, options.vocab, options.tokenizer);
  } else {
    const auto val_count = static_cast<std::size_t>(static_cast<double>(all.size()) * options.val_fraction);
    val_ = all.slice(all.size() - val_count, all.size());
    train_ = all.slice(0, all.size() - val_count);
  }
  const std::int64_t needed = static_cast<std::int64_t>(options.batch) * options.seq_len + 1;
  if (train_tokens() < needed)
    throw DataError(options.train.string() + ": " + std::to_string(train_tokens()) +
                    " training tokens, fewer than one batch needs (batch " + std::to_string(options.batch) +
                    " x seq_len " + std::to_string(options.seq_len) + " + 1 = " + std::to_string(needed) + ")");
  if (val_windows() < 1)
    throw DataError(
        (options.val ? options.val->string() : options.train.string()) + ": " + std::to_string(val_tokens()) +
        " validation tokens, fewer than one window of seq_len + 1 = " + std::to_string(options.seq_len + 1));
}

void Dataset::train_batch(std::uint64_t seed, std::int64_t step, int micro_batch, std::int32_t* inputs,
                          std::int32_t* targets) const {
  const std::int64_t T = options_.seq_len;
  const auto starts = static_cast<std::uint64_t>(train_tokens() - T);  // a window needs T + 1 tokens
  for (int row = 0; row < options_.batch; ++row) {
    const std::uint64_t key =
        splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(step)) ^
                   (static_cast<std::uint64_t>(micro_batch) << 32 | static_cast<std::uint64_t>(row)));
    const auto start = static_cast<std::size_t>(key % starts);
    for (std::int64_t t = 0; t < T; ++t) {
      inputs[row * T + t] = static_cast<std::int32_t>(train_[start + static_cast<std::size_t>(t)]);
      const std::size_t next = start + static_cast<std::size_t>(t) + 1;
      targets[row * T + t] = train_.is_target(next) ? static_cast<std::int32_t>(train_[next]) : kNoTarget;
    }
  }
}

std::int64_t Dataset::train_targets() const noexcept {
  if (!train_.has_loss_mask()) return train_tokens();
  std::int64_t count = 0;
  for (std::size_t i = 0; i < train_.size(); ++i) count += train_.is_target(i) ? 1 : 0;
  return count;
}

std::string Dataset::loss_mask_identity() const {
  if (!loss_masked()) return {};
  char text[48];
  std::snprintf(text, sizeof text, "%016llx,%016llx", static_cast<unsigned long long>(train_.mask_hash()),
                static_cast<unsigned long long>(val_.mask_hash()));
  return text;
}

std::int64_t target_count(std::span<const std::int32_t> targets) noexcept {
  std::int64_t count = 0;
  for (const std::int32_t target : targets) count += target >= 0 ? 1 : 0;
  return count;
}

std::int64_t window_count(const TokenSequence& tokens, int seq_len) {
  return static_cast<std::int64_t>(tokens.size()) / (seq_len + 1);
}

// Ids fit in int32: loading checked each is < vocab, an int.
void window_at(const TokenSequence& tokens, int seq_len, std::int64_t window, std::int32_t* inputs,
               std::int32_t* targets) {
  const std::size_t start = static_cast<std::size_t>(window) * static_cast<std::size_t>(seq_len + 1);
  for (int t = 0; t < seq_len; ++t) {
    inputs[t] = static_cast<std::int32_t>(tokens[start + static_cast<std::size_t>(t)]);
    const std::size_t next = start + static_cast<std::size_t>(t) + 1;
    targets[t] = tokens.is_target(next) ? static_cast<std::int32_t>(tokens[next]) : kNoTarget;
  }
}

std::int64_t Dataset::val_windows() const noexcept {
  return window_count(val_, options_.seq_len);
}

void Dataset::val_window(std::int64_t window, std::int32_t* inputs, std::int32_t* targets) const {
  window_at(val_, options_.seq_len, window, inputs, targets);
}

}  // namespace strata
