#pragma once
// Token sources: a .txt file read with the byte-level tokenizer (one token per byte, vocab 256)
// or an llm.c token file (.bin): a header of 256 little-endian int32 — magic 20240520, version,
// token count, then zeros — followed by exactly that many tokens:
//   version 1: uint16 tokens (llm.c's format; ids below 65536),
//   version 2: uint32 tokens (vocabularies over 65536, such as LLaMA 3's 128256).
// The file size must match the count exactly; a shorter or longer file is refused.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace strata {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersionU16 = 1;
inline constexpr std::int32_t kTokenFileVersionU32 = 2;
inline constexpr std::size_t kTokenFileHeaderInts = 256;

// How a data file is read, by its first bytes before its name (docs/manifest.md, "Data files"):
// a file that starts with the token-file magic is an llm.c token file whatever its suffix, as is
// any `.bin` (in any case; a wrong magic is then an error, not text); `.json` and `.jsonl` are
// refused (no JSON corpus reader yet); anything else is text, one token per byte.
enum class TokenFileFormat { llmc_tokens, text_bytes, json };
TokenFileFormat token_file_format(std::span<const char> bytes, const std::filesystem::path& path);

// Throws DataError when `path` is missing, a directory, or not a regular file (a FIFO would block
// forever, a device never ends).
void check_data_file(const std::filesystem::path& path);

// Reads every token and checks each is < vocab; throws DataError naming the file and problem.
std::vector<std::uint32_t> load_tokens(const std::filesystem::path& path, int vocab);
// The same from the file's bytes: the format is token_file_format's, and `path` names the file
// in messages; nothing is read from it. load_tokens reads the file and calls this.
std::vector<std::uint32_t> parse_tokens(std::span<const char> bytes, const std::filesystem::path& path, int vocab);

// Writes an llm.c token file atomically: version 1 (uint16) when every id fits in uint16, so
// llm.c and older readers still load it, and version 2 (uint32) otherwise. Throws DataError when
// there are more tokens than the header's int32 count can hold.
void write_token_file(const std::filesystem::path& path, const std::vector<std::uint32_t>& tokens);

}  // namespace strata
