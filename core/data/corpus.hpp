#pragma once
// A text corpus turned into tokens: `.txt` files (each file one document) and `.jsonl` files (each
// line a JSON object whose text field is one document), read in blocks so a corpus larger than
// memory streams through, tokenized on several threads, and handed on in input order. A document
// is framed as the tokenizer says: bos first when it adds one, eos last when it has one.
//
// Prompt and completion lines (`prompt_completion`): each .jsonl line holds a `prompt` and a
// `completion` string, encoded apart and joined (bos, the prompt's ids, the completion's, eos); the
// completion's ids and eos are targets, bos and the prompt's are not (core/data/loss_mask.hpp).
//
// Threads work on units: a .jsonl line, or a chunk of a .txt file cut where the tokenizer says a cut
// is exact (Tokenizer::last_exact_cut; a .txt file whose tokenizer cannot be cut, a SentencePiece
// unigram model's, is one unit, held whole).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tokenizer/tokenizer.hpp"

namespace strata {

enum class CorpusFormat { text, jsonl };
// By suffix, in any case: .txt (and any other name) is text, .jsonl is JSON lines; nothing for
// .json, which is not a corpus format.
std::optional<CorpusFormat> corpus_format(const std::filesystem::path& path);

struct CorpusProgress {
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  std::uint64_t tokens = 0;
  std::uint64_t documents = 0;
};

struct CorpusOptions {
  std::string field = "text";      // the .jsonl text field
  bool prompt_completion = false;  // .jsonl lines of prompt and completion, the completion the target
  int threads = 2;
  // Units that start in the last `val_fraction` of the input bytes go to validation.
  double val_fraction = 0.0;
  std::function<void(const CorpusProgress&)> progress;  // after each batch of units
};

struct CorpusSummary {
  CorpusProgress totals;
  std::uint64_t train_tokens = 0;
  std::uint64_t val_tokens = 0;
  std::uint64_t targets = 0;  // prompt and completion lines: the tokens that are targets
};

// A document's (or chunk's) ids and, for prompt and completion lines, which are targets (1) and
// which are not (0), one per id; empty: every id is.
using CorpusEmit =
    std::function<void(std::span<const std::uint32_t> ids, std::span<const std::uint8_t> targets, bool to_validation)>;

// Calls `emit` in input order. Throws DataError naming the file (and line, for .jsonl) on
// unreadable input, malformed JSON, a missing field or invalid UTF-8.
CorpusSummary tokenize_corpus(const std::vector<std::filesystem::path>& inputs, const Tokenizer& tokenizer,
                              const CorpusOptions& options, const CorpusEmit& emit);

}  // namespace strata
