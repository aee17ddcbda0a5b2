#pragma once
// Token sources without a tokenizer: a .txt file read as bytes (one token per byte, vocab 256) or
// an llm.c token file (.bin): a header of 256 little-endian int32 — magic 20240520, version,
// token count, then zeros — followed by exactly that many tokens:
//   version 1: uint16 tokens (llm.c's format; ids below 65536),
//   version 2: uint32 tokens (vocabularies over 65536, such as LLaMA 3's 128256).
// The file size must match the count exactly; a shorter or longer file is refused.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/util/atomic_file.hpp"

namespace strata {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersionU16 = 1;
inline constexpr std::int32_t kTokenFileVersionU32 = 2;
inline constexpr std::size_t kTokenFileHeaderInts = 256;

// How a data file is read, by its first bytes before its name (docs/manifest.md, "Data files"):
// a file that starts with the token-file magic is an llm.c token file whatever its suffix, as is
// any `.bin` (in any case; a wrong magic is then an error, not text); `.json` and `.jsonl` are JSON,
// which only a tokenizer reads (core/data/corpus_tokens.hpp: `.jsonl`, one document per line);
// anything else is text, one token per byte here, or a tokenizer's.
enum class TokenFileFormat { llmc_tokens, text_bytes, json };
TokenFileFormat token_file_format(std::span<const char> bytes, const std::filesystem::path& path);
// The same for the file at `path`, read from its first bytes.
TokenFileFormat token_file_format(const std::filesystem::path& path);

// Throws DataError when `path` is missing, a directory, or not a regular file (a FIFO would block
// forever, a device never ends).
void check_data_file(const std::filesystem::path& path);

// Where a token file's tokens are: `head` holds at least its first 1024 bytes (the header) and
// `file_size` is its whole size. Throws DataError on a wrong magic, an unknown version, or a size
// other than the header promises. Strata writes the XXH3-64 of the token bytes into header ints 3
// and 4 (low word first; llm.c leaves them 0, and reads no further than the count): `token_hash`,
// 0 when the file does not record one.
struct TokenFileLayout {
  std::size_t count;
  std::size_t width;        // 2 (version 1) or 4 (version 2)
  std::size_t first_token;  // byte offset
  std::uint64_t token_hash = 0;
};
TokenFileLayout token_file_layout(std::span<const char> head, std::uint64_t file_size,
                                  const std::filesystem::path& path);

// Reads every token and checks each is < vocab; throws DataError naming the file and problem.
std::vector<std::uint32_t> load_tokens(const std::filesystem::path& path, int vocab);
// The same from the file's bytes: the format is token_file_format's, and `path` names the file
// in messages; nothing is read from it. load_tokens reads the file and calls this.
std::vector<std::uint32_t> parse_tokens(std::span<const char> bytes, const std::filesystem::path& path, int vocab);

// Writes an llm.c token file atomically: version 1 (uint16) when every id fits in uint16, so
// llm.c and older readers still load it, and version 2 (uint32) otherwise. Throws DataError when
// there are more tokens than the header's int32 count can hold.
void write_token_file(const std::filesystem::path& path, const std::vector<std::uint32_t>& tokens);

// A token file written as its tokens come (a corpus larger than memory), atomically: nothing is at
// `path` until commit(). `wide` chooses version 2 (uint32); version 1 refuses an id above 65535.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::filesystem::path& path, bool wide);
  void append(std::span<const std::uint32_t> ids);
  std::int64_t count() const noexcept { return count_; }
  // Writes the count and the tokens' hash into the header and moves the file into place.
  void commit();
  // XXH3-64 of the token bytes written so far (TokenSequence::token_hash() of the file): what a
  // loss mask is written for.
  std::uint64_t token_hash() const noexcept;

 private:
  std::filesystem::path path_;
  bool wide_;
  AtomicFileWriter file_;
  std::int64_t count_ = 0;
  std::string buffer_;
  std::unique_ptr<void, void (*)(void*)> hash_;  // xxHash's streaming XXH3 state
};

}  // namespace strata
