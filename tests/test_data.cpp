#include <gtest/gtest.h>

#include "core/data/data_error.hpp"
#include "core/data/dataset.hpp"
#include "core/data/token_file.hpp"
#include "test_support.hpp"

namespace strata {
namespace {

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
  std::vector<std::uint16_t> tokens(5000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint16_t>(i % 300);
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

  std::vector<std::uint16_t> tokens(100, 3);
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

  std::vector<std::uint16_t> big_ids(100, 3);
  big_ids[42] = 999;
  write_token_file(dir / "ids.bin", big_ids);
  const std::string id = error_of({dir / "ids.bin", std::nullopt, 0.1, 256, 8, 2});
  EXPECT_NE(id.find("token 999 at position 42"), std::string::npos) << id;
  EXPECT_NE(id.find("ids.bin"), std::string::npos);
}

}  // namespace
}  // namespace strata
