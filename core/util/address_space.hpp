#pragma once
// Under an address-space limit (ulimit -v), OpenBLAS retries a failed allocation of a 128 MiB work
// buffer forever: a BLAS call that needs a new buffer (a thread's first call inside a parallel
// region) spins instead of failing. A run therefore proves, once its arenas are allocated and
// before its first step, that the limit leaves room for those buffers (hosts/strata's start-up
// check covers OpenBLAS's own initialisation, before main).
#include <cstdint>
#include <string>

namespace strata {

// OpenBLAS's work buffer on x86-64 and aarch64 (its BUFFER_SIZE).
inline constexpr std::uint64_t kOpenBlasBufferBytes = std::uint64_t{128} << 20;

// Empty when there is no address-space limit or `bytes` more of address space can be reserved
// now; otherwise a message saying how the limit falls short.
std::string address_space_shortfall(std::uint64_t bytes);

}  // namespace strata
