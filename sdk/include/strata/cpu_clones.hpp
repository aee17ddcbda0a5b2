#pragma once
// Run-time instruction-set dispatch for the few loops that the compiler cannot hand to a library.
// A function marked STRATA_CPU_CLONES is compiled three times (x86-64-v4: AVX-512; x86-64-v3:
// AVX2 + FMA; the x86-64 baseline), and the dynamic loader binds the widest one the CPU runs, once,
// at start-up. Shipped binaries assume no instruction set; matmuls dispatch inside OpenBLAS.
//
// Mark the per-chunk body, not a function holding an OpenMP region: OpenMP outlines the region's
// body into a function of its own, which would not be cloned.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(STRATA_NO_CPU_CLONES)
#define STRATA_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STRATA_CPU_CLONES
#endif
