// Inputs the fuzz targets (fuzz/, docs/fuzzing.md) found mishandled, each
// pinned down here so the fix stays: safetensors header numbers of the wrong
// kind, and manifest text that toml++ 3.3.0 must not see
// (core/manifest/toml_text_guard.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/safetensors.hpp"
#include "core/errors/manifest_error.hpp"
#include "core/manifest/manifest.hpp"

namespace strata {
namespace {

std::vector<char> safetensors_bytes(std::string header, std::size_t data_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<char> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, '\0');
  return bytes;
}

std::string checkpoint_error(const std::string& header, std::size_t data_bytes) {
  try {
    SafetensorsFile::parse(safetensors_bytes(header, data_bytes), "fuzzed.safetensors");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "accepted";
}

// Shapes and offsets are non-negative integers. A float used to be truncated
// (or, out of range, converted with undefined behaviour), negative extents
// wrapped, and an element count that overflowed 64 bits could match the data's
// size.
TEST(FuzzRegressions, SafetensorsHeaderNumbersMustBeNonNegativeIntegers) {
  const std::string prefix = R"({"a":{"dtype":"F32",)";
  EXPECT_NE(checkpoint_error(prefix + R"("shape":[2],"data_offsets":[0,8.0]}})", 8).find("data_offsets"),
            std::string::npos);
  EXPECT_NE(checkpoint_error(prefix + R"("shape":[2],"data_offsets":[0,1e308]}})", 8).find("data_offsets"),
            std::string::npos);
  EXPECT_NE(checkpoint_error(prefix + R"("shape":[2.5],"data_offsets":[0,8]}})", 8).find("shape"), std::string::npos);
  EXPECT_NE(checkpoint_error(prefix + R"("shape":[-2,-1],"data_offsets":[0,8]}})", 8).find("shape"), std::string::npos);
  EXPECT_NE(checkpoint_error(prefix + R"("shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0)
                .find("has shape [4294967296, 4294967296] but 0 bytes"),
            std::string::npos);
  EXPECT_NE(checkpoint_error(R"({"__metadata__":["pt"]})", 0).find("__metadata__ must be an object"),
            std::string::npos);
  // Still read: zero-sized tensors, even with an extent whose product with the
  // others would not fit (converting an empty tensor used to hand memcpy a null
  // pointer: UBSan fails this test then).
  EXPECT_EQ(checkpoint_error(prefix + R"("shape":[0,4294967296],"data_offsets":[0,0]}})", 0), "accepted");
  const SafetensorsFile empty =
      SafetensorsFile::parse(safetensors_bytes(prefix + R"("shape":[0],"data_offsets":[0,0]}})", 0), "empty");
  EXPECT_TRUE(empty.tensor("a", {0}).empty());
}

std::string manifest_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_manifest(text, "fuzzed.toml", overrides);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "accepted";
}

// toml++ 3.3.0 reaches undefined behaviour when it tests some non-ASCII
// characters for whitespace; the loader refuses them first, naming the place,
// and still reads non-ASCII text wherever TOML allows it.
TEST(FuzzRegressions, ManifestNonAsciiWhereTomlppTestsForWhitespaceIsRefused) {
  EXPECT_EQ(manifest_error("[data]\ntrain = \"t.txt\"\narché = 1\n"),
            "fuzzed.toml:3:5: malformed TOML: a non-ASCII character outside a "
            "string or comment (TOML allows "
            "them only there)");
  EXPECT_NE(manifest_error("x = 1 \xd0\x97\n").find("fuzzed.toml:1:7: malformed TOML"), std::string::npos);
  // A quote inside a malformed bare word opens no string: toml++ reads on to the next whitespace.
  EXPECT_NE(manifest_error("[model]\nn_layer = 2lama\"\x0en_la\xef\xbb\xbc\"\n").find("fuzzed.toml:2:22: malformed"),
            std::string::npos);
  EXPECT_NE(manifest_error("x = \"\"\"\\\xc3\xa9\"\"\"\n")
                .find("fuzzed.toml:1:9: malformed TOML: a non-ASCII "
                      "character right after a backslash"),
            std::string::npos);
  EXPECT_NE(manifest_error("x = \"\"\"\\  \n\n   \xc2\xa7\"\"\"\n")
                .find("fuzzed.toml:3:4: malformed TOML: a non-ASCII "
                      "character first after a line-ending backslash"),
            std::string::npos);

  const std::string fine =
      "\xEF\xBB\xBF# caf\xc3\xa9\n"
      "[data]\n"
      "train = \"donn\xc3\xa9\x65s.txt\"  # \xd0\x97\n"
      "val = '\xc3\xa9\\'\n"
      "[[telemetry]]\n"
      "plugin = \"jsonl\"\n"
      "\"cl\xc3\xa9\" = \"\"\"a\\\\\xc3\xa9 \"\"\xc3\xa9\"\"\"\"\n"
      "path = '''\xc3\xa9'''\n";
  EXPECT_EQ(manifest_error(fine), "accepted");
  const Manifest manifest = parse_manifest(fine, "fine.toml", {"data.val=v\xc3\xa9.bin"});
  EXPECT_EQ(manifest.data.train, "donn\xc3\xa9\x65s.txt");
  ASSERT_TRUE(manifest.data.val.has_value());
  EXPECT_EQ(*manifest.data.val,
            "v\xc3\xa9.bin");  // a bare word, taken as a string
}

}  // namespace
}  // namespace strata
