#include "kernels/cpu/linear_algebra.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "strata/dtype.hpp"

// LAPACK's Fortran entry points, as OpenBLAS exports them (column-major, 32-bit integers).
extern "C" {
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork,
             int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
}

namespace strata::cpu {

namespace {

// Products of bf16 operands widen at most this many floats of each operand per panel.
constexpr std::int64_t kPanelFloats = std::int64_t{1} << 20;

CBLAS_TRANSPOSE blas_transpose(Transpose transpose) {
  return transpose == Transpose::yes ? CblasTrans : CblasNoTrans;
}

int as_int(std::int64_t value, const char* what) {
  if (value < 0 || value > 0x7fffffff)
    throw std::length_error(std::string(what) + " does not fit LAPACK's 32-bit sizes: " + std::to_string(value));
  return static_cast<int>(value);
}

// The k-range [first, first + count) of op(x) widened to f32: for op(a) (m, k) its columns, for
// op(b) (k, n) its rows, laid out row-major as a (rows_out, count) or (count, cols_out) matrix.
void widen_panel(std::vector<float>& out, const std::uint16_t* x, std::int64_t ld, bool transposed, bool k_is_column,
                 std::int64_t other, std::int64_t first, std::int64_t count) {
  out.resize(static_cast<std::size_t>(other * count));
  // Element (i, p) of op(x) with i over `other` and p over the k-range; stored at x[i * ld + p] when
  // op(x) is x itself and k runs along its columns.
  for (std::int64_t i = 0; i < other; ++i)
    for (std::int64_t p = 0; p < count; ++p) {
      const std::int64_t kk = first + p;
      const bool row_major_element = k_is_column != transposed;  // stored as (i, kk)
      const std::uint16_t stored = row_major_element ? x[i * ld + kk] : x[kk * ld + i];
      const std::size_t at =
          k_is_column ? static_cast<std::size_t>(i * count + p) : static_cast<std::size_t>(p * other + i);
      out[at] = bf16_to_f32(stored);
    }
}

}  // namespace

void gemm(const op::Gemm& call) {
  if (call.m == 0 || call.n == 0) return;
  if (call.operands == DType::f32) {
    cblas_sgemm(CblasRowMajor, blas_transpose(call.transpose_a), blas_transpose(call.transpose_b),
                as_int(call.m, "gemm m"), as_int(call.n, "gemm n"), as_int(call.k, "gemm k"), call.alpha,
                static_cast<const float*>(call.a), as_int(call.lda, "gemm lda"), static_cast<const float*>(call.b),
                as_int(call.ldb, "gemm ldb"), call.beta, call.c, as_int(call.ldc, "gemm ldc"));
    return;
  }
  // bf16: panels of k, each widened into op(a)'s (m, kp) and op(b)'s (kp, n), added in order.
  const std::int64_t widest = std::max<std::int64_t>(std::max(call.m, call.n), 1);
  const std::int64_t panel = std::clamp<std::int64_t>(kPanelFloats / widest, 1, std::max<std::int64_t>(call.k, 1));
  std::vector<float> a_panel, b_panel;
  const auto* a = static_cast<const std::uint16_t*>(call.a);
  const auto* b = static_cast<const std::uint16_t*>(call.b);
  if (call.k == 0) {  // alpha * (empty product) + beta c
    for (std::int64_t i = 0; i < call.m; ++i)
      for (std::int64_t j = 0; j < call.n; ++j)
        call.c[i * call.ldc + j] = call.beta == 0.0f ? 0.0f : call.beta * call.c[i * call.ldc + j];
    return;
  }
  for (std::int64_t first = 0; first < call.k; first += panel) {
    const std::int64_t count = std::min(panel, call.k - first);
    widen_panel(a_panel, a, call.lda, call.transpose_a == Transpose::yes, true, call.m, first, count);
    widen_panel(b_panel, b, call.ldb, call.transpose_b == Transpose::yes, false, call.n, first, count);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(call.m, "gemm m"), as_int(call.n, "gemm n"),
                as_int(count, "gemm k"), call.alpha, a_panel.data(), as_int(count, "gemm k"), b_panel.data(),
                as_int(call.n, "gemm n"), first == 0 ? call.beta : 1.0f, call.c, as_int(call.ldc, "gemm ldc"));
  }
}

void qr(float* a, float* r, std::int64_t rows, std::int64_t cols) {
  if (rows < cols) throw std::invalid_argument("qr needs rows >= cols");
  if (cols == 0) return;
  const int m = as_int(rows, "qr rows");
  const int n = as_int(cols, "qr cols");
  // Column-major copy (LAPACK's layout): element (i, j) at i + j * m.
  std::vector<float> work_matrix(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) work_matrix[static_cast<std::size_t>(i + j * rows)] = a[i * cols + j];
  std::vector<float> tau(static_cast<std::size_t>(cols));
  int info = 0;
  int query = -1;
  float size = 0.0f;
  sgeqrf_(&m, &n, work_matrix.data(), &m, tau.data(), &size, &query, &info);
  int lwork = std::max(1, static_cast<int>(size));
  std::vector<float> work(static_cast<std::size_t>(lwork));
  sgeqrf_(&m, &n, work_matrix.data(), &m, tau.data(), work.data(), &lwork, &info);
  if (info != 0) throw std::runtime_error("sgeqrf failed: info " + std::to_string(info));
  // R's diagonal signs, read before sorgqr overwrites R with Q.
  std::vector<float> signs(static_cast<std::size_t>(cols));
  for (std::int64_t j = 0; j < cols; ++j)
    signs[static_cast<std::size_t>(j)] = work_matrix[static_cast<std::size_t>(j + j * rows)] < 0.0f ? -1.0f : 1.0f;
  if (r != nullptr)
    for (std::int64_t i = 0; i < cols; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        r[i * cols + j] =
            j >= i ? signs[static_cast<std::size_t>(i)] * work_matrix[static_cast<std::size_t>(i + j * rows)] : 0.0f;
  sorgqr_(&m, &n, &n, work_matrix.data(), &m, tau.data(), &size, &query, &info);
  lwork = std::max(1, static_cast<int>(size));
  work.assign(static_cast<std::size_t>(lwork), 0.0f);
  sorgqr_(&m, &n, &n, work_matrix.data(), &m, tau.data(), work.data(), &lwork, &info);
  if (info != 0) throw std::runtime_error("sorgqr failed: info " + std::to_string(info));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      a[i * cols + j] = signs[static_cast<std::size_t>(j)] * work_matrix[static_cast<std::size_t>(i + j * rows)];
}

void eigh(float* a, float* values, std::int64_t n) {
  if (n == 0) return;
  const int size = as_int(n, "eigh n");
  // Symmetric: the row-major matrix is its own column-major transpose.
  std::vector<float> vectors(a, a + n * n);
  const char jobz = 'V', uplo = 'L';
  int info = 0, query = -1, iwork_size = 0;
  float work_size = 0.0f;
  ssyevd_(&jobz, &uplo, &size, vectors.data(), &size, values, &work_size, &query, &iwork_size, &query, &info);
  int lwork = std::max(1, static_cast<int>(work_size));
  int liwork = std::max(1, iwork_size);
  std::vector<float> work(static_cast<std::size_t>(lwork));
  std::vector<int> iwork(static_cast<std::size_t>(liwork));
  ssyevd_(&jobz, &uplo, &size, vectors.data(), &size, values, work.data(), &lwork, iwork.data(), &liwork, &info);
  if (info < 0) throw std::logic_error("ssyevd: argument " + std::to_string(-info) + " is illegal");
  if (info > 0) {  // no convergence (a matrix with NaN or infinities): NaN out, as the op states
    std::fill(values, values + n, std::nanf(""));
    std::fill(a, a + n * n, std::nanf(""));
    return;
  }
  // Column-major: vector j is vectors[j * n .. j * n + n). Its sign: the largest-magnitude component
  // positive, the first one on a tie.
  for (std::int64_t j = 0; j < n; ++j) {
    const float* v = vectors.data() + j * n;
    std::int64_t largest = 0;
    for (std::int64_t i = 1; i < n; ++i)
      if (std::fabs(v[i]) > std::fabs(v[largest])) largest = i;
    const float sign = v[largest] < 0.0f ? -1.0f : 1.0f;
    for (std::int64_t i = 0; i < n; ++i) a[i * n + j] = sign * v[i];
  }
}

}  // namespace strata::cpu
