#pragma once
// STRATA_HOST_DEVICE marks an inline helper that CUDA kernels call too (nvcc defines __CUDACC__),
// so the GPU computes it from the same text as the CPU. A .cu file that calls one builds with
// -fmad=false, so that each operation rounds as on the CPU (IEEE sqrt and division are nvcc's
// defaults): the two give the same bits.
#ifdef __CUDACC__
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif
