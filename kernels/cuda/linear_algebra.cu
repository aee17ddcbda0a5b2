// See linear_algebra.hpp. Launch shapes: the element-wise kernels are grid-stride (grid_stride.cuh);
// the eigenvector sign kernel is one block of kThreads per vector, reducing |v_i| with a fixed tree.
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/linear_algebra.hpp"

#include <cmath>

namespace strata::cuda {

namespace {

constexpr std::size_t kAlignment = 256;

std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

int as_int(std::int64_t value) {
  return static_cast<int>(value);
}

// Carves the workspace: a column-major copy of the matrix, the solver's scalars, its info word and
// its own room.
struct Carved {
  float* matrix;
  float* scalars;  // tau (qr) or nothing
  float* signs;
  int* info;
  float* room;
  int room_floats;
};

Carved carve(void* workspace, std::size_t matrix_floats, std::size_t scalar_floats, std::size_t room_floats) {
  auto* bytes = static_cast<unsigned char*>(workspace);
  Carved carved{};
  carved.matrix = reinterpret_cast<float*>(bytes);
  bytes += aligned(matrix_floats * sizeof(float));
  carved.scalars = reinterpret_cast<float*>(bytes);
  bytes += aligned(scalar_floats * sizeof(float));
  carved.signs = reinterpret_cast<float*>(bytes);
  bytes += aligned(scalar_floats * sizeof(float));
  carved.info = reinterpret_cast<int*>(bytes);
  bytes += aligned(sizeof(int));
  carved.room = reinterpret_cast<float*>(bytes);
  carved.room_floats = static_cast<int>(room_floats);
  return carved;
}

std::size_t carved_bytes(std::size_t matrix_floats, std::size_t scalar_floats, std::size_t room_floats) {
  return aligned(matrix_floats * sizeof(float)) + 2 * aligned(scalar_floats * sizeof(float)) + aligned(sizeof(int)) +
         aligned(room_floats * sizeof(float));
}

// R's diagonal signs and, when asked, R itself (upper triangular, row-major, signs applied), from
// geqrf's column-major result.
__global__ void qr_signs_kernel(float* signs, float* r, const float* factored, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t index = first_index(); index < cols * cols; index += index_stride()) {
    const std::int64_t i = index / cols, j = index % cols;
    const float sign = factored[i + i * rows] < 0.0f ? -1.0f : 1.0f;
    if (i == j) signs[i] = sign;
    if (r != nullptr) r[i * cols + j] = j >= i ? sign * factored[i + j * rows] : 0.0f;
  }
}

// Q back to row-major, column j times sign j; NaN everywhere when the solver failed.
__global__ void qr_store_kernel(float* a, const float* q, const float* signs, const int* info, std::int64_t rows,
                                std::int64_t cols) {
  const bool failed = *info != 0;
  for (std::int64_t index = first_index(); index < rows * cols; index += index_stride()) {
    const std::int64_t i = index / cols, j = index % cols;
    a[index] = failed ? NAN : signs[j] * q[i + j * rows];
  }
}

// One block per eigenvector (a column of the column-major result): its largest |component|, the
// first on a tie, decides its sign; the vector is written into row-major column j.
__global__ void eigh_store_kernel(float* a, float* values, const float* vectors, const int* info, std::int64_t n) {
  __shared__ float best_value[kThreads];
  __shared__ std::int64_t best_index[kThreads];
  const std::int64_t j = blockIdx.x;
  const float* v = vectors + j * n;
  float value = -1.0f;
  std::int64_t index = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += kThreads)
    if (fabsf(v[i]) > value) value = fabsf(v[i]), index = i;
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float other = best_value[threadIdx.x + half];
      const std::int64_t other_index = best_index[threadIdx.x + half];
      if (other > best_value[threadIdx.x] ||
          (other == best_value[threadIdx.x] && other_index < best_index[threadIdx.x]))
        best_value[threadIdx.x] = other, best_index[threadIdx.x] = other_index;
    }
    __syncthreads();
  }
  const bool failed = *info != 0;
  const float sign = v[best_index[0]] < 0.0f ? -1.0f : 1.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += kThreads) a[i * n + j] = failed ? NAN : sign * v[i];
  if (threadIdx.x == 0 && failed) values[j] = NAN;
}

// Column-major (rows, cols) copy of a row-major (rows, cols) matrix: the transpose of its storage.
cublasStatus_t to_column_major(cublasHandle_t blas, float* out, const float* in, std::int64_t rows, std::int64_t cols) {
  const float one = 1.0f, zero = 0.0f;
  return cublasSgeam(blas, CUBLAS_OP_T, CUBLAS_OP_N, as_int(rows), as_int(cols), &one, in, as_int(cols), &zero, out,
                     as_int(rows), out, as_int(rows));
}

}  // namespace

// Row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T: the stored operands, swapped.
cublasStatus_t gemm(cublasHandle_t handle, const op::Gemm& call) {
  if (call.m == 0 || call.n == 0) return CUBLAS_STATUS_SUCCESS;
  const cudaDataType_t type = call.operands == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasOperation_t op_b = call.transpose_b == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = call.transpose_a == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  return cublasGemmEx(handle, op_b, op_a, as_int(call.n), as_int(call.m), as_int(call.k), &call.alpha, call.b, type,
                      as_int(call.ldb), call.a, type, as_int(call.lda), &call.beta, call.c, CUDA_R_32F,
                      as_int(call.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

std::size_t qr_workspace_bytes(const Solver& solver, std::int64_t rows, std::int64_t cols) {
  int geqrf = 0, orgqr = 0;
  solver.library().geqrf_buffer_size(solver.handle(), as_int(rows), as_int(cols), nullptr, as_int(rows), &geqrf);
  solver.library().orgqr_buffer_size(solver.handle(), as_int(rows), as_int(cols), as_int(cols), nullptr, as_int(rows),
                                     nullptr, &orgqr);
  const auto room = static_cast<std::size_t>(geqrf > orgqr ? geqrf : orgqr);
  return carved_bytes(static_cast<std::size_t>(rows * cols), static_cast<std::size_t>(cols), room);
}

std::size_t eigh_workspace_bytes(const Solver& solver, std::int64_t n) {
  int room = 0;
  solver.library().syevd_buffer_size(solver.handle(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, as_int(n),
                                     nullptr, as_int(n), nullptr, &room);
  return carved_bytes(static_cast<std::size_t>(n * n), 0, static_cast<std::size_t>(room));
}

const char* qr(cudaStream_t stream, cublasHandle_t blas, const Solver& solver, float* a, float* r, std::int64_t rows,
               std::int64_t cols, void* workspace, std::size_t workspace_bytes) {
  if (rows < cols) return "qr needs rows >= cols";
  if (cols == 0) return nullptr;
  const std::size_t room =
      (workspace_bytes - carved_bytes(static_cast<std::size_t>(rows * cols), static_cast<std::size_t>(cols), 0)) /
      sizeof(float);
  const Carved w = carve(workspace, static_cast<std::size_t>(rows * cols), static_cast<std::size_t>(cols), room);
  if (to_column_major(blas, w.matrix, a, rows, cols) != CUBLAS_STATUS_SUCCESS) return "cublasSgeam failed";
  if (solver.library().geqrf(solver.handle(), as_int(rows), as_int(cols), w.matrix, as_int(rows), w.scalars, w.room,
                             w.room_floats, w.info) != CUSOLVER_STATUS_SUCCESS)
    return "cusolverDnSgeqrf failed";
  qr_signs_kernel<<<grid_stride_blocks(cols * cols), kThreads, 0, stream>>>(w.signs, r, w.matrix, rows, cols);
  if (solver.library().orgqr(solver.handle(), as_int(rows), as_int(cols), as_int(cols), w.matrix, as_int(rows),
                             w.scalars, w.room, w.room_floats, w.info) != CUSOLVER_STATUS_SUCCESS)
    return "cusolverDnSorgqr failed";
  qr_store_kernel<<<grid_stride_blocks(rows * cols), kThreads, 0, stream>>>(a, w.matrix, w.signs, w.info, rows, cols);
  return nullptr;
}

const char* eigh(cudaStream_t stream, const Solver& solver, float* a, float* values, std::int64_t n, void* workspace,
                 std::size_t workspace_bytes) {
  if (n == 0) return nullptr;
  const std::size_t room = (workspace_bytes - carved_bytes(static_cast<std::size_t>(n * n), 0, 0)) / sizeof(float);
  const Carved w = carve(workspace, static_cast<std::size_t>(n * n), 0, room);
  // Symmetric: the row-major matrix is its own column-major transpose.
  if (cudaMemcpyAsync(w.matrix, a, static_cast<std::size_t>(n * n) * sizeof(float), cudaMemcpyDeviceToDevice, stream) !=
      cudaSuccess)
    return "cudaMemcpyAsync failed";
  if (solver.library().syevd(solver.handle(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, as_int(n), w.matrix,
                             as_int(n), values, w.room, w.room_floats, w.info) != CUSOLVER_STATUS_SUCCESS)
    return "cusolverDnSsyevd failed";
  eigh_store_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(a, values, w.matrix, w.info, n);
  return nullptr;
}

}  // namespace strata::cuda
