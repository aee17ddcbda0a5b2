#include "core/data/corpus_tokens.hpp"

#include <spdlog/spdlog.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/data/corpus.hpp"
#include "core/data/token_file.hpp"
#include "core/errors/data_error.hpp"
#include "core/tokenizer/pretokenizer_regex.hpp"

namespace strata {

namespace {

// XXH3-64 of the file's bytes, read 8 MiB at a time (about 1 s for a GB in the page cache).
std::uint64_t content_hash(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot be read to find its token cache");
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  std::vector<char> buffer(std::size_t{8} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    XXH3_64bits_update(&state, buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw DataError(path.string() + ": read error while finding its token cache");
  return XXH3_64bits_digest(&state);
}

}  // namespace

std::filesystem::path tokenized_cache_path(const std::filesystem::path& text, const Tokenizer& tokenizer) {
  // splitmix-style mixing: any change of tokenizer, of how Strata encodes with it (its version and
  // the Unicode tables it reads), or of the text's content gives another name (its size and time
  // did, until a text edited in place with both restored kept its stale cache).
  static const std::uint64_t tables = [] {  // the same in every build and process
    const std::string version = unicode_tables_version();
    return XXH3_64bits(version.data(), version.size());
  }();
  std::uint64_t key = tokenizer.fingerprint();
  for (const std::uint64_t part : {content_hash(text), kTokenizerEncodingVersion, tables}) {
    key ^= part + 0x9E3779B97F4A7C15ull + (key << 6) + (key >> 2);
    key = (key ^ (key >> 31)) * 0xBF58476D1CE4E5B9ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  return text.string() + ".tokens-" + hex + ".bin";
}

void check_tokenizer_fits(const Tokenizer& tokenizer, const std::filesystem::path& directory, int vocab) {
  if (tokenizer.vocab_size() > vocab)
    throw DataError(directory.string() + ": the tokenizer's vocabulary of " + std::to_string(tokenizer.vocab_size()) +
                    " is larger than model.vocab = " + std::to_string(vocab) +
                    " (its higher ids would index past the embedding)");
}

TokenSequence load_corpus_tokens(const std::filesystem::path& path, int vocab, const Tokenizer* tokenizer) {
  check_data_file(path);
  const TokenFileFormat format = token_file_format(path);
  if (format == TokenFileFormat::llmc_tokens || tokenizer == nullptr) {
    if (format == TokenFileFormat::text_bytes && vocab > 256)
      spdlog::warn(
          "{}: text without a tokenizer is read as bytes (ids 0-255), so model.vocab = {}'s other {} "
          "embedding rows never train; [data] tokenizer names a tokenizer",
          path.string(), vocab, vocab - 256);
    if (format == TokenFileFormat::json && corpus_format(path))
      throw DataError(path.string() +
                      ": a .jsonl corpus needs a tokenizer: set [data] tokenizer = \"DIR\" (or "
                      "tokenize it first with strata prepare)");
    if (format == TokenFileFormat::llmc_tokens) return TokenSequence::map_token_file(path, vocab);
    return TokenSequence(load_tokens(path, vocab));
  }
  if (!corpus_format(path))
    throw DataError(path.string() + ": a .json file is not a corpus: one JSON object per line is (.jsonl)");

  check_tokenizer_fits(*tokenizer, path, vocab);  // so every id it makes is < vocab
  const auto cache = tokenized_cache_path(path, *tokenizer);
  std::error_code error;
  if (std::filesystem::exists(cache, error)) {
    try {
      auto tokens = TokenSequence::map_token_file(cache, vocab);
      // The cache's ids are checked against the hash written with them: edited, it is made again.
      if (tokens.recorded_hash() != 0 && tokens.recorded_hash() == tokens.token_hash()) {
        spdlog::info("{}: tokens from the cache {}", path.string(), cache.string());
        return tokens;
      }
      spdlog::warn(
          "{}: the cache's tokens are not those written (edited, or written before caches recorded "
          "their hash); tokenizing again",
          cache.string());
    } catch (const DataError& e) {
      spdlog::warn("{}: the cache is unusable ({}); tokenizing again", cache.string(), e.what());
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::uint32_t> tokens;
  tokenize_corpus({path}, *tokenizer, CorpusOptions{},
                  [&](std::span<const std::uint32_t> ids, std::span<const std::uint8_t>, bool) {
                    tokens.insert(tokens.end(), ids.begin(), ids.end());
                  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{}: {} tokens by the {} tokenizer in {:.1f} s", path.string(), tokens.size(), tokenizer->kind(),
               seconds);
  try {
    write_token_file(cache, tokens);
    return TokenSequence::map_token_file(cache, vocab);
  } catch (const std::exception& e) {
    // A read-only data directory costs the next run a tokenization, nothing more.
    spdlog::warn("{}: could not write the token cache ({}); the next run tokenizes again", cache.string(), e.what());
  }
  return TokenSequence(std::move(tokens));
}

}  // namespace strata
