// Conformance rows for the general product and the small factorizations (strata/op_records.hpp,
// op::Gemm, op::Qr, op::Eigh): gemm against a double-precision reference over both transposes,
// padded leading dimensions, alpha and beta (beta 0 with NaN in c, which must not leak), f32 and bf16
// operands; qr and eigh against the properties that make their factors unique (orthonormal columns,
// the product rebuilt, R's non-negative diagonal, ascending eigenvalues, each eigenvector's
// largest component positive), so every backend must give the same factors to rounding.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend_buffers.hpp"
#include "conformance_case.hpp"
#include "kernels/cpu/linear_algebra.hpp"

namespace strata::test::conformance {

namespace {

std::string transposes(Transpose a, Transpose b) {
  return std::string(a == Transpose::yes ? "T" : "N") + (b == Transpose::yes ? "T" : "N");
}

Case gemm_case(std::int64_t m, std::int64_t n, std::int64_t k, Transpose ta, Transpose tb, DType operands, float alpha,
               float beta) {
  const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + " " +
                            transposes(ta, tb) + " alpha " + std::to_string(alpha).substr(0, 4) + " beta " +
                            std::to_string(beta).substr(0, 4);
  return {"gemm", shape, std::string(dtype_name(operands)), Op::gemm, 1e-5, [=](Backend& backend) {
            Ops& ops = backend.ops();
            BackendBuffers memory(backend);
            // Stored shapes with room past each row (leading dimensions wider than the rows).
            const std::int64_t a_rows = ta == Transpose::yes ? k : m, a_cols = ta == Transpose::yes ? m : k;
            const std::int64_t b_rows = tb == Transpose::yes ? n : k, b_cols = tb == Transpose::yes ? k : n;
            const std::int64_t lda = a_cols + 3, ldb = b_cols + 1, ldc = n + 2;
            Floats a = random_floats(static_cast<std::size_t>(a_rows * lda), 41);
            Floats b = random_floats(static_cast<std::size_t>(b_rows * ldb), 42);
            Floats c = random_floats(static_cast<std::size_t>(m * ldc), 43);
            if (beta == 0.0f) std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
            const auto a_bf16 = to_bf16(a), b_bf16 = to_bf16(b);
            if (operands == DType::bf16) a = from_bf16(a_bf16), b = from_bf16(b_bf16);
            const void* a_b = operands == DType::bf16 ? static_cast<const void*>(memory.upload(a_bf16))
                                                      : static_cast<const void*>(memory.upload(a));
            const void* b_b = operands == DType::bf16 ? static_cast<const void*>(memory.upload(b_bf16))
                                                      : static_cast<const void*>(memory.upload(b));
            float* c_b = memory.upload(c);
            op::Gemm call{ta, tb, m, n, k, alpha, a_b, lda, b_b, ldb, operands, beta, c_b, ldc};
            ops.run(call);
            std::vector<double> c_r = widen_to_double(c);
            const auto a_d = widen_to_double(a), b_d = widen_to_double(b);
            cpu::reference::gemm<double>(ta == Transpose::yes, tb == Transpose::yes, m, n, k, alpha, a_d.data(), lda,
                                         b_d.data(), ldb, beta, c_r.data(), ldc);
            const Floats got = memory.download(c_b, c.size());
            // The rows' padding is never written; the product's elements are.
            Floats values, padding;
            std::vector<double> values_r;
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < ldc; ++j) {
                const std::size_t at = static_cast<std::size_t>(i * ldc + j);
                if (j < n)
                  values.push_back(got[at]), values_r.push_back(c_r[at]);
                else if (!(std::isnan(got[at]) && std::isnan(c[at])) && got[at] != c[at])
                  return 1.0;
              }
            return error_of(values, values_r);
          }};
}

// Q^T Q = I, Q R = A, R upper triangular with a non-negative diagonal.
Case qr_case(std::int64_t rows, std::int64_t cols) {
  return {"qr", std::to_string(rows) + "x" + std::to_string(cols), "f32", Op::qr, 2e-5, [=](Backend& backend) {
            Ops& ops = backend.ops();
            BackendBuffers memory(backend);
            const Floats a = random_floats(static_cast<std::size_t>(rows * cols), 44);
            float* q_b = memory.upload(a);
            float* r_b = memory.upload(Floats(static_cast<std::size_t>(cols * cols), 9.0f));
            ops.qr(q_b, r_b, rows, cols);
            const Floats q = memory.download(q_b, a.size()),
                         r = memory.download(r_b, static_cast<std::size_t>(cols * cols));
            double worst = 0.0;
            for (std::int64_t i = 0; i < cols; ++i)
              for (std::int64_t j = 0; j < cols; ++j) {
                double dot = 0.0;
                for (std::int64_t p = 0; p < rows; ++p) dot += static_cast<double>(q[p * cols + i]) * q[p * cols + j];
                worst = std::max(worst, std::abs(dot - (i == j ? 1.0 : 0.0)));
                const float rij = r[static_cast<std::size_t>(i * cols + j)];
                if ((j < i && rij != 0.0f) || (i == j && rij < 0.0f)) return 1.0;
              }
            for (std::int64_t i = 0; i < rows; ++i)
              for (std::int64_t j = 0; j < cols; ++j) {
                double product = 0.0;
                for (std::int64_t p = 0; p <= j; ++p) product += static_cast<double>(q[i * cols + p]) * r[p * cols + j];
                worst = std::max(worst, std::abs(product - a[static_cast<std::size_t>(i * cols + j)]));
              }
            return worst;
          }};
}

// A V = V diag(w), V^T V = I, w ascending, each vector's largest-magnitude component positive.
Case eigh_case(std::int64_t n) {
  return {"eigh", std::to_string(n) + "x" + std::to_string(n), "f32", Op::eigh, 1e-4, [=](Backend& backend) {
            Ops& ops = backend.ops();
            BackendBuffers memory(backend);
            const Floats noise = random_floats(static_cast<std::size_t>(n * n), 45);
            Floats a(noise.size());
            for (std::int64_t i = 0; i < n; ++i)
              for (std::int64_t j = 0; j < n; ++j)
                a[static_cast<std::size_t>(i * n + j)] = 0.5f * (noise[i * n + j] + noise[j * n + i]);
            float* v_b = memory.upload(a);
            float* w_b = memory.upload(Floats(static_cast<std::size_t>(n)));
            ops.eigh(v_b, w_b, n);
            const Floats v = memory.download(v_b, a.size()), w = memory.download(w_b, static_cast<std::size_t>(n));
            double worst = 0.0;
            for (std::int64_t j = 0; j < n; ++j) {
              if (j > 0 && w[j] < w[j - 1]) return 1.0;
              std::int64_t largest = 0;
              for (std::int64_t i = 1; i < n; ++i)
                if (std::abs(v[i * n + j]) > std::abs(v[largest * n + j])) largest = i;
              if (v[largest * n + j] < 0.0f) return 1.0;
              for (std::int64_t i = 0; i < n; ++i) {
                double av = 0.0, vtv = 0.0;
                for (std::int64_t p = 0; p < n; ++p) {
                  av += static_cast<double>(a[i * n + p]) * v[p * n + j];
                  vtv += static_cast<double>(v[p * n + i]) * v[p * n + j];
                }
                worst = std::max({worst, std::abs(av - static_cast<double>(w[j]) * v[i * n + j]),
                                  std::abs(vtv - (i == j ? 1.0 : 0.0))});
              }
            }
            return worst;
          }};
}

}  // namespace

std::vector<Case> linear_algebra_cases() {
  std::vector<Case> cases;
  for (const DType operands : {DType::f32, DType::bf16})
    for (const Transpose ta : {Transpose::no, Transpose::yes})
      for (const Transpose tb : {Transpose::no, Transpose::yes})
        cases.push_back(gemm_case(9, 7, 13, ta, tb, operands, 1.0f, 0.0f));
  cases.push_back(gemm_case(33, 40, 70, Transpose::yes, Transpose::no, DType::f32, -0.5f, 0.75f));
  cases.push_back(gemm_case(33, 40, 70, Transpose::no, Transpose::yes, DType::bf16, 2.0f, 1.0f));
  cases.push_back(qr_case(9, 9));
  cases.push_back(qr_case(64, 12));
  cases.push_back(eigh_case(5));
  cases.push_back(eigh_case(48));
  return cases;
}

}  // namespace strata::test::conformance
