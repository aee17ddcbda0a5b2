#pragma once
// The tokens of one data file, however it is stored: an llm.c token file as it is; with a
// tokenizer, a .txt or .jsonl file tokenized (core/data/corpus.hpp) into a token file cached beside
// it, named by the tokenizer's fingerprint and the text's content hash, so the next run reads the
// cache, once its tokens match the hash written in its header; without one, text as bytes (one
// token per byte), as ever.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/data/token_sequence.hpp"

#include "core/tokenizer/tokenizer.hpp"

namespace strata {

// The cache of `text` tokenized by `tokenizer`: TEXT.tokens-<16 hex digits>.bin beside it.
std::filesystem::path tokenized_cache_path(const std::filesystem::path& text, const Tokenizer& tokenizer);

// Maps (a token file, or the tokenized cache) or reads (text as bytes) `path`; every id is checked
// < vocab. `tokenizer` may be null. Throws DataError naming the file. A cache that cannot be
// written is warned about, not fatal: the tokens are then held in memory.
TokenSequence load_corpus_tokens(const std::filesystem::path& path, int vocab, const Tokenizer* tokenizer);

// Refuses (DataError) a tokenizer whose ids reach past the model's embedding rows.
void check_tokenizer_fits(const Tokenizer& tokenizer, const std::filesystem::path& directory, int vocab);

}  // namespace strata
