#pragma once
// Token sources: a .txt file read with the byte-level tokenizer (one token per byte, vocab 256)
// or an llm.c token file (.bin): a header of 256 int32 — magic 20240520, version 1, token count —
// followed by that many uint16 tokens.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace strata {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersion = 1;
inline constexpr std::size_t kTokenFileHeaderInts = 256;

// Reads every token and checks each is < vocab; throws DataError naming the file and problem.
std::vector<std::uint16_t> load_tokens(const std::filesystem::path& path, int vocab);

// Writes an llm.c token file (atomically).
void write_token_file(const std::filesystem::path& path, const std::vector<std::uint16_t>& tokens);

}  // namespace strata
