#include <gtest/gtest.h>

#include <array>
#include <fstream>

#include "core/data/data_fingerprint.hpp"
#include "core/data/dataset.hpp"
#include "core/data/token_file.hpp"
#include "core/data/token_sequence.hpp"
#include "core/errors/data_error.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

// The error of reading `path` whole (load_tokens) and of mapping it (TokenSequence, as a run does
// for a token file): both must refuse it with the same words.
std::string load_error(const std::filesystem::path& path, int vocab) {
  std::string read, mapped;
  try {
    load_tokens(path, vocab);
  } catch (const DataError& e) {
    read = e.what();
  }
  if (token_file_format({}, path) != TokenFileFormat::llmc_tokens) return read;
  try {
    TokenSequence::map_token_file(path, vocab);
  } catch (const DataError& e) {
    mapped = e.what();
  }
  return read == mapped ? read : "read: " + read + " | mapped: " + mapped;
}

std::int32_t header_int(const std::filesystem::path& path, int index) {
  std::ifstream in(path, std::ios::binary);
  std::int32_t value = 0;
  in.seekg(index * static_cast<std::streamoff>(sizeof value));
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  return value;
}

// A token file with any header and payload, as another writer (or a corrupt one) might leave it.
void write_raw_token_file(const std::filesystem::path& path, std::int32_t version, std::int32_t count,
                          const std::string& payload) {
  std::array<std::int32_t, kTokenFileHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = version;
  header[2] = count;
  test::write_text(path, std::string(reinterpret_cast<const char*>(header.data()), sizeof header) + payload);
}

std::string error_of(const DataOptions& options) {
  try {
    Dataset dataset(options);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(Data, TokenFileRoundTripAndBatchesAreDeterministic) {
  const auto dir = test::temporary_directory("data_roundtrip");
  std::vector<std::uint32_t> tokens(5000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>(i % 300);
  write_token_file(dir / "t.bin", tokens);
  EXPECT_EQ(load_tokens(dir / "t.bin", 300), tokens);
  const Dataset dataset({dir / "t.bin", std::nullopt, 0.1, 300, 8, 4});
  EXPECT_EQ(dataset.val_tokens(), 500);
  std::vector<std::int32_t> a(32), b(32), ta(32), tb(32);
  dataset.train_batch(1, 7, 0, a.data(), ta.data());
  dataset.train_batch(1, 7, 0, b.data(), tb.data());
  EXPECT_EQ(a, b);
  for (int i = 0; i < 31; ++i)
    if (i % 8 != 7) {
      EXPECT_EQ(ta[static_cast<std::size_t>(i)], a[static_cast<std::size_t>(i) + 1])
          << "targets are inputs shifted by one";
    }
  dataset.train_batch(1, 8, 0, b.data(), tb.data());
  EXPECT_NE(a, b);
}

TEST(Data, BadFilesGetClearErrorsNamingTheFile) {
  const auto dir = test::temporary_directory("data_errors");
  EXPECT_NE(error_of({dir / "missing.txt", std::nullopt, 0.1, 256, 8, 2}).find("missing.txt: no such file"),
            std::string::npos);

  test::write_text(dir / "magic.bin", std::string(2048, '\x01'));
  EXPECT_NE(error_of({dir / "magic.bin", std::nullopt, 0.1, 256, 8, 2}).find("magic.bin: wrong magic number"),
            std::string::npos);

  std::vector<std::uint32_t> tokens(100, 3);
  write_token_file(dir / "full.bin", tokens);
  const auto full = std::filesystem::file_size(dir / "full.bin");
  std::filesystem::copy_file(dir / "full.bin", dir / "truncated.bin");
  std::filesystem::resize_file(dir / "truncated.bin", full - 10);
  const std::string truncated = error_of({dir / "truncated.bin", std::nullopt, 0.1, 256, 8, 2});
  EXPECT_NE(truncated.find("truncated.bin: truncated token file"), std::string::npos) << truncated;
  test::write_text(dir / "short_header.bin", "abc");
  EXPECT_NE(
      error_of({dir / "short_header.bin", std::nullopt, 0.1, 256, 8, 2}).find("shorter than the 1024-byte header"),
      std::string::npos);

  test::write_text(dir / "tiny.txt", "too short");
  const std::string few = error_of({dir / "tiny.txt", std::nullopt, 0.1, 256, 8, 2});
  EXPECT_NE(few.find("fewer than one batch"), std::string::npos) << few;

  std::vector<std::uint32_t> big_ids(100, 3);
  big_ids[42] = 999;
  write_token_file(dir / "ids.bin", big_ids);
  const std::string id = error_of({dir / "ids.bin", std::nullopt, 0.1, 256, 8, 2});
  EXPECT_NE(id.find("token 999 at position 42"), std::string::npos) << id;
  EXPECT_NE(id.find("ids.bin"), std::string::npos);
}

TEST(Data, Version1RoundTripWhenIdsFitInUint16) {
  const auto dir = test::temporary_directory("data_v1");
  const std::vector<std::uint32_t> tokens = {0, 1, 65535, 42, 50256};
  write_token_file(dir / "v1.bin", tokens);
  EXPECT_EQ(header_int(dir / "v1.bin", 1), 1) << "ids below 65536 keep llm.c's uint16 format";
  EXPECT_EQ(std::filesystem::file_size(dir / "v1.bin"), 1024 + tokens.size() * 2);
  EXPECT_EQ(load_tokens(dir / "v1.bin", 65536), tokens);
}

TEST(Data, Version2RoundTripWithIdsOver65535) {
  const auto dir = test::temporary_directory("data_v2");
  std::vector<std::uint32_t> tokens(2000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>(i * 97 % 128256);
  tokens[7] = 128255;  // LLaMA 3's last id
  tokens[8] = 65536;
  write_token_file(dir / "v2.bin", tokens);
  EXPECT_EQ(header_int(dir / "v2.bin", 1), 2);
  EXPECT_EQ(header_int(dir / "v2.bin", 2), 2000);
  EXPECT_EQ(std::filesystem::file_size(dir / "v2.bin"), 1024 + tokens.size() * 4);
  EXPECT_EQ(load_tokens(dir / "v2.bin", 128256), tokens);
  // Windows carry the wide ids through to the model's int32 inputs and targets.
  EXPECT_NO_THROW(Dataset({dir / "v2.bin", std::nullopt, 0.1, 128256, 8, 2}));
  std::vector<std::int32_t> inputs(8), targets(8);
  // Through the mapped file, as a run reads it: the same windows.
  const TokenSequence mapped = TokenSequence::map_token_file(dir / "v2.bin", 128256);
  EXPECT_EQ(mapped.to_vector(), tokens);
  window_at(mapped, 8, 0, inputs.data(), targets.data());
  EXPECT_EQ(inputs[7], 128255);
  EXPECT_EQ(targets[7], 65536);
  EXPECT_EQ(targets[0], 97);
}

TEST(Data, Version2IdOutsideTheVocabularyIsNamed) {
  const auto dir = test::temporary_directory("data_v2_vocab");
  std::vector<std::uint32_t> tokens(100, 5);
  tokens[61] = 128256;
  write_token_file(dir / "wide.bin", tokens);
  const std::string error = load_error(dir / "wide.bin", 128256);
  EXPECT_NE(
      error.find("wide.bin: token 128256 at position 61 is outside the model's vocabulary (model.vocab = 128256)"),
      std::string::npos)
      << error;
  tokens[61] = 4000000000u;  // above int32: compared without wrapping negative
  write_token_file(dir / "huge.bin", tokens);
  EXPECT_NE(load_error(dir / "huge.bin", 128256).find("token 4000000000 at position 61"), std::string::npos);
}

TEST(Data, SizeNotMatchingTheCountIsRefusedForBothVersions) {
  const auto dir = test::temporary_directory("data_size");
  // Version 1: 10 uint16 tokens promised, 8 given (short) or 12 given (long).
  write_raw_token_file(dir / "v1_short.bin", 1, 10, std::string(16, '\0'));
  std::string error = load_error(dir / "v1_short.bin", 256);
  EXPECT_NE(error.find("v1_short.bin: truncated token file: the version-1 header promises 10 uint16 tokens "
                       "(expected 1044 bytes) but the file has 1040 bytes"),
            std::string::npos)
      << error;
  write_raw_token_file(dir / "v1_long.bin", 1, 10, std::string(24, '\0'));
  error = load_error(dir / "v1_long.bin", 256);
  EXPECT_NE(error.find("v1_long.bin: token file too long: the version-1 header promises 10 uint16 tokens "
                       "(expected 1044 bytes) but the file has 1048 bytes"),
            std::string::npos)
      << error;
  // Version 2: 10 uint32 tokens need 40 bytes; 20 bytes is what a uint16 writer would leave.
  write_raw_token_file(dir / "v2_short.bin", 2, 10, std::string(20, '\0'));
  error = load_error(dir / "v2_short.bin", 256);
  EXPECT_NE(error.find("v2_short.bin: truncated token file: the version-2 header promises 10 uint32 tokens "
                       "(expected 1064 bytes) but the file has 1044 bytes"),
            std::string::npos)
      << error;
  write_raw_token_file(dir / "v2_long.bin", 2, 10, std::string(44, '\0'));
  error = load_error(dir / "v2_long.bin", 256);
  EXPECT_NE(error.find("v2_long.bin: token file too long: the version-2 header promises 10 uint32 tokens "
                       "(expected 1064 bytes) but the file has 1068 bytes"),
            std::string::npos)
      << error;
  write_raw_token_file(dir / "v2_exact.bin", 2, 10, std::string(40, '\0'));
  EXPECT_EQ(load_tokens(dir / "v2_exact.bin", 256), std::vector<std::uint32_t>(10, 0));
}

TEST(Data, UnknownVersionIsRefused) {
  const auto dir = test::temporary_directory("data_version");
  write_raw_token_file(dir / "v3.bin", 3, 10, std::string(40, '\0'));
  const std::string error = load_error(dir / "v3.bin", 256);
  EXPECT_NE(error.find("v3.bin: unsupported token file version 3 (expected 1 for uint16 tokens or 2 for uint32 "
                       "tokens)"),
            std::string::npos)
      << error;
  write_raw_token_file(dir / "v0.bin", 0, 10, std::string(20, '\0'));
  EXPECT_NE(load_error(dir / "v0.bin", 256).find("unsupported token file version 0"), std::string::npos);
}

// The format comes from the first bytes before the name: the magic makes a token file whatever it
// is called, `.bin` in any case without it is an error (not text), JSON is refused, the rest is text.
TEST(Data, FormatIsToldByTheMagicNumberBeforeTheName) {
  std::array<std::int32_t, 2> magic = {kTokenFileMagic, 1};
  const std::span<const char> token_bytes(reinterpret_cast<const char*>(magic.data()), sizeof magic);
  const std::string text = "In the beginning";
  for (const char* name : {"a.bin", "a.BIN", "a.txt", "a", "a.jsonl"})
    EXPECT_EQ(token_file_format(token_bytes, name), TokenFileFormat::llmc_tokens) << name;
  EXPECT_EQ(token_file_format(text, "a.Bin"), TokenFileFormat::llmc_tokens) << "a .bin is never read as text";
  EXPECT_EQ(token_file_format(text, "a.txt"), TokenFileFormat::text_bytes);
  EXPECT_EQ(token_file_format(text, "a"), TokenFileFormat::text_bytes);
  EXPECT_EQ(token_file_format(text, "a.JSONL"), TokenFileFormat::json);
  EXPECT_THROW(parse_tokens(text, "a.jsonl", 256), DataError);
}

// The fingerprint a save records follows the content, not the path or the modification time.
TEST(Data, FingerprintChangesWithTheContentOnly) {
  const auto dir = test::temporary_directory("fingerprint");
  test::write_text(dir / "a.txt", "In the beginning God created the heaven and the earth.");
  const std::string first = data_fingerprint(dir / "a.txt");
  test::write_text(dir / "a.txt", "In the beginning God created the heaven and the earth.");
  EXPECT_EQ(data_fingerprint(dir / "a.txt"), first) << "rewritten with the same bytes";
  test::write_text(dir / "a.txt", "In the beginning God created the heaven and the earth!");
  EXPECT_NE(data_fingerprint(dir / "a.txt"), first) << "one byte changed, the size the same";
  EXPECT_THROW(data_fingerprint(dir / "missing.txt"), DataError);
}

}  // namespace
}  // namespace strata
