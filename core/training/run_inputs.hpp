#pragma once
// The run's data as training and `strata eval` read it: the tokenizer, the dataset's options, and
// the validation loss (the same windows, in the same passes, in both).
#include <cstdint>
#include <functional>
#include <memory>

#include "core/data/dataset.hpp"
#include "core/executor/executor.hpp"
#include "core/manifest/manifest.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace strata {

DataOptions data_options(const Manifest& manifest, const Tokenizer* tokenizer);

// The manifest's tokenizer ([data] tokenizer, or the [model] from directory's), checked against
// model.vocab; null without one.
std::unique_ptr<Tokenizer> tokenizer_for(const Manifest& manifest);

// Mean cross-entropy over windows, `rows` windows per forward pass, the last pass padded.
double mean_window_loss(Executor& executor, std::int64_t windows, int rows, int seq_len,
                        const std::function<void(std::int64_t, std::int32_t*, std::int32_t*)>& window_at_index);

// The validation loss as training reports it and `strata eval` reproduces it: the first
// eval_batches x micro-batch rows windows of the validation split (all when eval_batches = 0), in
// passes of `pass_rows` rows (a data-parallel rank's model holds fewer rows than the manifest's
// micro batch; 0: the micro batch's).
double validation_loss(Executor& executor, const Dataset& dataset, const Manifest& manifest, int pass_rows = 0);

}  // namespace strata
