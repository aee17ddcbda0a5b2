#include "cpu/dynamic_quantization.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "strata/cpu_clones.hpp"

namespace strata::adamw8bit {

namespace {

// The float bits that pick a bucket of the fast search: magnitudes below 2^-26 share the first
// bucket (every map value but 0 is far larger), magnitudes from 1 up share the last, and in between
// each binade splits into 128 buckets by the top 7 mantissa bits.
constexpr std::uint32_t kFirstBucketBits = 101u << 7;  // exponent of 2^-26, mantissa 0
constexpr std::uint32_t kLastBucketBits = 127u << 7;   // 1.0
constexpr std::uint32_t kBuckets = kLastBucketBits - kFirstBucketBits + 1;

// (Ternaries, not std::clamp: a clamp returns a reference, which keeps the loop from vectorizing.)
constexpr std::uint32_t bucket_of(std::uint32_t bits) {
  const std::uint32_t magnitude = (bits & 0x7fffffffu) >> 16;
  const std::uint32_t low_clamped = magnitude < kFirstBucketBits ? kFirstBucketBits : magnitude;
  const std::uint32_t clamped = low_clamped > kLastBucketBits ? kLastBucketBits : low_clamped;
  return clamped - kFirstBucketBits + (bits >> 31) * kBuckets;
}

// A map and its decision thresholds: code(x) = the number of thresholds below x. Threshold i
// separates codes i and i + 1 at the exact midpoint of their values, shifted to the float grid so
// that one strict comparison of a float x decides the tie as quantize_value does (toward zero).
// Index 255 is padding, +infinity. A bucket of floats (bucket_of) holds at most one threshold (the
// nearest-code test probes every bucket's edges and every threshold), so
// code(x) = first_code[bucket] + (x > thresholds[first_code[bucket]]).
struct MapTables {
  std::array<float, 256> values;
  std::array<float, 256> thresholds;
  std::array<std::int32_t, 2 * kBuckets> first_code;  // the code of the bucket's lowest float (int32: gathers)
  std::uint8_t zero_code;
};

// The levels of one sign's magnitudes: decades 10^-E for E = 0..decades-1, the first with
// 2^(decades-1) levels and each next with half as many (see the header).
void add_magnitudes(std::vector<double>& magnitudes, int decades) {
  double decade = 1.0;
  for (int e = 0; e < decades; ++e) {
    const int levels = 1 << (decades - 1 - e);
    for (int j = 0; j < levels; ++j) magnitudes.push_back(decade * (0.1 + 0.9 * (j + 1) / levels));
    decade /= 10.0;
  }
}

MapTables build_tables(MapKind kind) {
  std::vector<double> magnitudes;
  std::vector<double> values{0.0};
  if (kind == MapKind::signed_dynamic) {
    add_magnitudes(magnitudes, 7);
    for (const double magnitude : magnitudes) {
      values.push_back(magnitude);
      values.push_back(-magnitude);
    }
    values.push_back(-1e-7);  // the sign bit over no indicator bit: not a second zero
  } else {
    add_magnitudes(magnitudes, 8);
    values.insert(values.end(), magnitudes.begin(), magnitudes.end());
  }
  std::sort(values.begin(), values.end());

  MapTables tables{};
  for (std::size_t i = 0; i < 256; ++i) tables.values[i] = static_cast<float>(values.at(i));
  for (std::size_t i = 0; i < 255; ++i) {
    // Exact in double: the map's nonzero magnitudes lie within a factor 2^24, so the sum of two
    // neighbours needs at most 50 bits.
    const double midpoint = (static_cast<double>(tables.values[i]) + tables.values[i + 1]) / 2.0;
    float threshold = static_cast<float>(midpoint);
    if (midpoint > 0.0) {
      // Up iff x > midpoint: threshold = the largest float <= midpoint.
      if (static_cast<double>(threshold) > midpoint) threshold = std::nextafter(threshold, -1.0f);
    } else {
      // Up iff x >= midpoint (the tie goes to the upper value, nearer zero): threshold = the
      // largest float < midpoint.
      if (static_cast<double>(threshold) >= midpoint) threshold = std::nextafter(threshold, -1.0f);
    }
    tables.thresholds[i] = threshold;
  }
  tables.thresholds[255] = std::numeric_limits<float>::infinity();
  const auto code_of = [&](float x) {
    return static_cast<std::int32_t>(std::lower_bound(tables.thresholds.begin(), tables.thresholds.begin() + 255, x) -
                                     tables.thresholds.begin());
  };
  for (std::uint32_t bucket = 0; bucket < kBuckets; ++bucket) {
    // The bucket's smallest magnitude, and its largest (the float below the next bucket's first).
    const float low = bucket == 0 ? 0.0f : std::bit_cast<float>((bucket + kFirstBucketBits) << 16);
    const float high = bucket + 1 == kBuckets
                           ? std::numeric_limits<float>::infinity()
                           : std::nextafter(std::bit_cast<float>((bucket + 1 + kFirstBucketBits) << 16), 0.0f);
    tables.first_code[bucket] = code_of(low);
    tables.first_code[kBuckets + bucket] = code_of(-high);
  }
  const auto zero = std::find(tables.values.begin(), tables.values.end(), 0.0f);
  tables.zero_code = static_cast<std::uint8_t>(zero - tables.values.begin());
  return tables;
}

const MapTables& tables_of(MapKind kind) {
  static const MapTables signed_tables = build_tables(MapKind::signed_dynamic);
  static const MapTables unsigned_tables = build_tables(MapKind::unsigned_dynamic);
  return kind == MapKind::signed_dynamic ? signed_tables : unsigned_tables;
}

// Two table reads per value (the bucket's first code, then one threshold) instead of a binary
// search's eight; branch-free, so the loop vectorizes.
STRATA_CPU_CLONES void quantize_normalized(std::uint8_t* codes, const float* values, std::int64_t count, float absmax,
                                           const MapTables& tables) {
  const std::int32_t* first_code = tables.first_code.data();
  const float* thresholds = tables.thresholds.data();
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) {
    const float x = values[i] / absmax;
    const std::int32_t first = first_code[bucket_of(std::bit_cast<std::uint32_t>(x))];
    codes[i] = static_cast<std::uint8_t>(first + (x > thresholds[first] ? 1 : 0));
  }
}

STRATA_CPU_CLONES void dequantize_scaled(float* values, const std::uint8_t* codes, std::int64_t count, float absmax,
                                         const float* map) {
#pragma omp simd
  for (std::int64_t i = 0; i < count; ++i) values[i] = map[codes[i]] * absmax;
}

STRATA_CPU_CLONES float absmax_of(const float* values, std::int64_t count) {
  float absmax = 0.0f;
#pragma omp simd reduction(max : absmax)
  for (std::int64_t i = 0; i < count; ++i) absmax = std::max(absmax, std::abs(values[i]));
  return absmax;
}

}  // namespace

std::span<const float, 256> quantization_map(MapKind kind) {
  return tables_of(kind).values;
}

std::span<const float, 256> decision_thresholds(MapKind kind) {
  return tables_of(kind).thresholds;
}

std::uint8_t zero_code(MapKind kind) {
  return tables_of(kind).zero_code;
}

std::uint8_t quantize_value(std::span<const float, 256> map, float normalized) {
  const auto upper = std::lower_bound(map.begin(), map.end(), normalized);  // first value >= normalized
  if (upper == map.begin()) return 0;
  if (upper == map.end()) return 255;
  const auto index = static_cast<std::uint8_t>(upper - map.begin());
  // Exact in double wherever the two distances can tie (normalized within the map's scale).
  const double below = static_cast<double>(normalized) - *(upper - 1);
  const double above = static_cast<double>(*upper) - normalized;
  if (below < above) return index - 1;
  if (above < below) return index;
  return normalized > 0.0f ? index - 1 : index;
}

std::int64_t block_count(std::int64_t count, std::int64_t block_size) {
  return (count + block_size - 1) / block_size;
}

float block_absmax(const float* values, std::int64_t count) {
  return absmax_of(values, count);
}

void quantize_block(std::uint8_t* codes, const float* values, std::int64_t count, float absmax, MapKind kind) {
  const MapTables& tables = tables_of(kind);
  if (absmax == 0.0f) {
    std::fill(codes, codes + count, tables.zero_code);
    return;
  }
  quantize_normalized(codes, values, count, absmax, tables);
}

void dequantize_block(float* values, const std::uint8_t* codes, std::int64_t count, float absmax, MapKind kind) {
  if (absmax == 0.0f) {
    std::fill(values, values + count, 0.0f);
    return;
  }
  dequantize_scaled(values, codes, count, absmax, tables_of(kind).values.data());
}

void quantize_blockwise(std::uint8_t* codes, float* absmax, const float* values, std::int64_t count,
                        std::int64_t block_size, MapKind kind) {
  const std::int64_t blocks = block_count(count, block_size);
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t start = b * block_size;
    const std::int64_t length = std::min(block_size, count - start);
    absmax[b] = block_absmax(values + start, length);
    quantize_block(codes + start, values + start, length, absmax[b], kind);
  }
}

void dequantize_blockwise(float* values, const std::uint8_t* codes, const float* absmax, std::int64_t count,
                          std::int64_t block_size, MapKind kind) {
  const std::int64_t blocks = block_count(count, block_size);
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t start = b * block_size;
    dequantize_block(values + start, codes + start, std::min(block_size, count - start), absmax[b], kind);
  }
}

}  // namespace strata::adamw8bit
