#pragma once
// This process's resident memory (RSS), as Linux counts it: `strata plan` predicts a run's from
// its arenas plus what the process holds before any model, and `strata train` reports its peak.
#include <cstdint>

namespace strata {

std::uint64_t resident_bytes();       // now (/proc/self/statm); 0 when it cannot be read
std::uint64_t peak_resident_bytes();  // the most since the process started (getrusage's ru_maxrss)

}  // namespace strata
