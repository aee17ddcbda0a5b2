#pragma once
// General products and small dense factorizations on the CPU (Ops::gemm, qr, eigh): the products
// through OpenBLAS's sgemm, the factorizations through the LAPACK routines OpenBLAS carries
// (sgeqrf and sorgqr, ssyevd), with their signs fixed as strata/op_records.hpp states. Each call
// gives the same bits for the same inputs and thread count.
#include <cstdint>

#include "strata/op_records.hpp"

namespace strata::cpu {

// c (m, n) = alpha op(a) @ op(b) + beta c, row-major; bf16 operands are widened a panel of k at a
// time into a bounded buffer, the panels' products added into c in order.
void gemm(const op::Gemm& call);
// a (rows, cols), rows >= cols: the thin Q in place; r (cols, cols), when not null, upper
// triangular with a non-negative diagonal.
void qr(float* a, float* r, std::int64_t rows, std::int64_t cols);
// a (n, n) symmetric: eigenvectors as columns in place, each with its largest-magnitude component
// positive; values (n) ascending.
void eigh(float* a, float* values, std::int64_t n);

namespace reference {

// c = alpha op(a) op(b) + beta c in double, for the tests.
template <typename Real>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, Real alpha, const Real* a,
          std::int64_t lda, const Real* b, std::int64_t ldb, Real beta, Real* c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      Real sum = 0;
      for (std::int64_t p = 0; p < k; ++p)
        sum += (transpose_a ? a[p * lda + i] : a[i * lda + p]) * (transpose_b ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * sum + (beta == Real(0) ? Real(0) : beta * c[i * ldc + j]);
    }
}

}  // namespace reference
}  // namespace strata::cpu
