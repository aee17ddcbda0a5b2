// Inputs the fuzz targets (fuzz/, docs/fuzzing.md) found mishandled, each pinned down here so the
// fix stays.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/safetensors.hpp"

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

// Shapes and offsets are non-negative integers. A float used to be truncated (or, out of range,
// converted with undefined behaviour), negative extents wrapped, and an element count that
// overflowed 64 bits could match the data's size.
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
  // Still read: zero-sized tensors, even with an extent whose product with the others would not fit
  // (converting an empty tensor used to hand memcpy a null pointer: UBSan fails this test then).
  EXPECT_EQ(checkpoint_error(prefix + R"("shape":[0,4294967296],"data_offsets":[0,0]}})", 0), "accepted");
  const SafetensorsFile empty =
      SafetensorsFile::parse(safetensors_bytes(prefix + R"("shape":[0],"data_offsets":[0,0]}})", 0), "empty");
  EXPECT_TRUE(empty.tensor("a", {0}).empty());
}

}  // namespace
}  // namespace strata
