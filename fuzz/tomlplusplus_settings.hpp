#pragma once
// Included ahead of every source of the fuzz tree (STRATA_FUZZ, see CMakeLists.txt): toml++ is
// compiled from its headers, so the fuzzer is guided by coverage inside the TOML parser too, and
// its internal assertions stay off, as in the packaged library Strata links: toml++ 3.3.0 asserts
// on malformed table headers such as "[#", which it then reports as a parse error when the
// assertion is off. The fuzzer is here for Strata's behaviour; memory errors and undefined
// behaviour inside the parser remain ASan and UBSan findings either way.
#define TOML_HEADER_ONLY 1
#define TOML_ASSERT(expr) static_assert(true)
