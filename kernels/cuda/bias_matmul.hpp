#pragma once
// The bf16 forward product with its bias added in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS), as
// llm.c does: out = inp · W + bias in one kernel, where cuBLAS's plain GEMM needs the bias
// broadcast into out first and out read back (beta = 1), two extra passes over an (N, out)
// matrix. bf16 operands, f32 accumulation and output.
//
// Deterministic like the plain path: one algorithm per shape and pointer alignment, chosen once by
// cuBLASLt's heuristic for a fixed workspace and kept, and no split-K reduction scheme (whose
// partial sums could be added in any order). One BiasMatmul per backend (its handle and plans);
// not for use from two threads at once.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "strata/ops.hpp"

namespace strata::cuda {

class BiasMatmul {
 public:
  BiasMatmul();
  ~BiasMatmul();
  BiasMatmul(const BiasMatmul&) = delete;
  BiasMatmul& operator=(const BiasMatmul&) = delete;

  // Row-major out (N, out_features) = inp (N, in) · W + bias, inp and W bf16 (W in shape.layout),
  // bias and out f32. CUBLAS_STATUS_NOT_SUPPORTED, before anything is launched, where cuBLASLt has
  // no algorithm for the shape and alignments (bias must be 16-byte aligned): the caller then runs
  // the plain path.
  cublasStatus_t forward(cudaStream_t stream, float* out, const std::uint16_t* inp, const void* weight,
                         const float* bias, const MatmulShape& shape, void* workspace, std::size_t workspace_bytes);

 private:
  struct Plan;
  // layout, N, in, out, the alignments (bytes, at most 256) of inp, weight and out, and the
  // workspace's size (an algorithm chosen for more room needs it).
  using Key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, int, int, int, std::size_t>;
  const Plan* plan_for(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // null where no algorithm fits
};

// What matmul_forward needs to add a bf16 product's bias in the epilogue; a null matmul means the
// plain path (bias broadcast, then beta = 1).
struct BiasEpilogue {
  BiasMatmul* matmul = nullptr;
  void* workspace = nullptr;  // cuBLAS's own fixed workspace: calls on one stream never overlap
  std::size_t workspace_bytes = 0;
};

}  // namespace strata::cuda
