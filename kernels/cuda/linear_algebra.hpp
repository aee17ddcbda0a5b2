#pragma once
// General products and small dense factorizations on the device (Ops::gemm, qr, eigh): the products
// on cuBLAS, the factorizations on cuSOLVER (geqrf + orgqr, syevd), with the signs fixed as
// strata/op_records.hpp states, by kernels beside them (cuSOLVER opened at first use: solver_library.hpp). cuSOLVER
// works column-major, so a row-major operand is transposed into the workspace first (cuBLAS's geam) and the factors
// transposed back by the sign-fixing kernels. Deterministic: fixed algorithms and a fixed order in every reduction.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/solver_library.hpp"
#include "strata/op_records.hpp"

namespace strata::cuda {

// Each returns the first cuBLAS status that is not success (launch errors are the caller's).
cublasStatus_t gemm(cublasHandle_t handle, const op::Gemm& call);

// Device bytes the factorizations need in `workspace`.
std::size_t qr_workspace_bytes(const Solver& solver, std::int64_t rows, std::int64_t cols);
std::size_t eigh_workspace_bytes(const Solver& solver, std::int64_t n);

// The first failure's text, or null. A matrix cuSOLVER cannot factor gives NaN, not an error.
const char* qr(cudaStream_t stream, cublasHandle_t blas, const Solver& solver, float* a, float* r, std::int64_t rows,
               std::int64_t cols, void* workspace, std::size_t workspace_bytes);
const char* eigh(cudaStream_t stream, const Solver& solver, float* a, float* values, std::int64_t n, void* workspace,
                 std::size_t workspace_bytes);

}  // namespace strata::cuda
