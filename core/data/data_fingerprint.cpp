#include "core/data/data_fingerprint.hpp"

#include <cstdio>
#include <fstream>
#include <vector>

#include "core/errors/data_error.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace strata {

namespace {

constexpr std::uintmax_t kWholeFileLimit = std::uintmax_t{64} << 20;
constexpr std::uintmax_t kSampleBytes = std::uintmax_t{1} << 20;
constexpr int kSamples = 64;

}  // namespace

std::string data_fingerprint(const std::filesystem::path& path) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  std::ifstream in(path, std::ios::binary);
  if (error || !in) throw DataError(path.string() + ": cannot be read to fingerprint it");
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  std::vector<char> buffer(kSampleBytes);
  const auto hash_range = [&](std::uintmax_t offset, std::uintmax_t bytes) {
    in.seekg(static_cast<std::streamoff>(offset));
    while (bytes > 0) {
      const auto chunk = static_cast<std::streamsize>(std::min<std::uintmax_t>(bytes, buffer.size()));
      if (!in.read(buffer.data(), chunk)) throw DataError(path.string() + ": read failed while fingerprinting it");
      XXH3_64bits_update(&state, buffer.data(), static_cast<std::size_t>(chunk));
      bytes -= static_cast<std::uintmax_t>(chunk);
    }
  };
  if (size <= kWholeFileLimit) {
    hash_range(0, size);
  } else {
    const std::uintmax_t stride = (size - kSampleBytes) / (kSamples + 1);
    for (int i = 0; i <= kSamples; ++i) hash_range(static_cast<std::uintmax_t>(i) * stride, kSampleBytes);
    hash_range(size - kSampleBytes, kSampleBytes);
  }
  char text[64];
  std::snprintf(text, sizeof text, "size:%ju,xxh3:%016llx", size,
                static_cast<unsigned long long>(XXH3_64bits_digest(&state)));
  return text;
}

}  // namespace strata
