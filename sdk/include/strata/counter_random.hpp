#pragma once
// Counter-based randomness, shared by core and plugins: a value depends only on its inputs (seed,
// step, index), on any compiler or standard library, so a resumed or recomputed pass draws the
// same numbers. The functions compile for CUDA kernels too (nvcc defines __CUDACC__), so a mask a
// GPU draws is the CPU's bit for bit.
#include <cstdint>
#include <string_view>

#include "strata/host_device.hpp"

namespace strata {

// SplitMix64's mixing function (Steele, Lea, Flood 2014).
STRATA_HOST_DEVICE constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1), never 0 or 1, from 64 random bits (the top 53).
STRATA_HOST_DEVICE constexpr double uniform_from_bits(std::uint64_t bits) noexcept {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

// FNV-1a of a tensor's name: the stream a tensor draws from, the same in every run and process.
constexpr std::uint64_t name_hash(std::string_view name) noexcept {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return hash;
}

}  // namespace strata
