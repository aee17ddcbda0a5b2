#include "core/training/run_inputs.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "core/data/corpus_tokens.hpp"

namespace strata {

DataOptions data_options(const Manifest& manifest, const Tokenizer* tokenizer) {
  return {manifest.data.train,
          manifest.data.val,
          manifest.data.val_fraction,
          manifest.model.vocab(),
          manifest.model.seq_len(),
          manifest.train.micro_batch_rows(),
          tokenizer};
}

// The manifest's tokenizer ([data] tokenizer, or the [model] from directory's), checked against
// model.vocab; null without one.
std::unique_ptr<Tokenizer> tokenizer_for(const Manifest& manifest) {
  if (!manifest.data.tokenizer) return nullptr;
  auto tokenizer = load_tokenizer(*manifest.data.tokenizer);
  check_tokenizer_fits(*tokenizer, *manifest.data.tokenizer, manifest.model.vocab());
  spdlog::info("tokenizer: {} from {}, vocabulary {}", tokenizer->kind(), manifest.data.tokenizer->string(),
               tokenizer->vocab_size());
  return tokenizer;
}

// Mean cross-entropy over the windows' targets (every position without a loss mask), `rows`
// windows per forward pass, the last pass padded.
double mean_window_loss(Executor& executor, std::int64_t windows, int rows, int seq_len,
                        const std::function<void(std::int64_t, std::int32_t*, std::int32_t*)>& window_at_index) {
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(rows) * seq_len);
  std::vector<std::int32_t> targets(inputs.size());
  double sum = 0.0;
  std::int64_t target_total = 0;
  for (std::int64_t first = 0; first < windows; first += rows) {
    const int real_rows = static_cast<int>(std::min<std::int64_t>(rows, windows - first));
    for (int row = 0; row < rows; ++row) {
      const std::int64_t window = first + std::min(row, real_rows - 1);  // padding repeats the last window
      window_at_index(window, inputs.data() + static_cast<std::size_t>(row) * seq_len,
                      targets.data() + static_cast<std::size_t>(row) * seq_len);
    }
    sum += executor.forward_loss_sum({inputs, targets}, real_rows);
    target_total += target_count(std::span(targets).first(static_cast<std::size_t>(real_rows) * seq_len));
  }
  // Windows of prompt alone have no target: their loss is 0, not a division by zero.
  return sum / static_cast<double>(std::max<std::int64_t>(target_total, 1));
}

// The validation loss as training reports it and `strata eval` reproduces it: the first
// eval_batches x micro-batch rows windows of the validation split (all when eval_batches = 0), in
// passes of `pass_rows` rows (a data-parallel rank's model holds fewer rows than the manifest's
// micro batch; 0: the micro batch's).
double validation_loss(Executor& executor, const Dataset& dataset, const Manifest& manifest, int pass_rows) {
  const int rows = manifest.train.micro_batch_rows();
  const std::int64_t windows = manifest.train.eval_batches > 0
                                   ? std::min<std::int64_t>(dataset.val_windows(), manifest.train.eval_batches * rows)
                                   : dataset.val_windows();
  return mean_window_loss(executor, windows, pass_rows > 0 ? pass_rows : rows, manifest.model.seq_len(),
                          [&](std::int64_t w, std::int32_t* in, std::int32_t* out) { dataset.val_window(w, in, out); });
}

}  // namespace strata
