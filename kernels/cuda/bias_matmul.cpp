#include "kernels/cuda/bias_matmul.hpp"

#include <stdexcept>

// As in matmul.cu, the row-major product out (N, OC) = inp (N, C) · W is issued column-major as
// out^T (OC, N) = op(W) (OC, C) · inp^T (C, N); the bias, one value per row of out^T, is what
// CUBLASLT_EPILOGUE_BIAS broadcasts along the columns.
namespace strata::cuda {

namespace {

// The largest power of two, up to 256, that divides the address.
int alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  int alignment = 1;
  while (alignment < 256 && address % (2 * static_cast<std::uintptr_t>(alignment)) == 0) alignment *= 2;
  return alignment;
}

}  // namespace

struct BiasMatmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

BiasMatmul::BiasMatmul() {
  if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLASLt could not start");
}

BiasMatmul::~BiasMatmul() {
  plans_.clear();
  cublasLtDestroy(handle_);
}

const BiasMatmul::Plan* BiasMatmul::plan_for(const Key& key) {
  if (auto found = plans_.find(key); found != plans_.end()) return found->second.get();
  const auto [layout, N, C, OC, align_inp, align_weight, align_out, workspace_bytes] = key;
  auto plan = std::make_unique<Plan>();
  bool ok = cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
  const cublasOperation_t op_a = layout == static_cast<int>(WeightLayout::in_out) ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_b = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  ok = ok &&
       cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a) ==
           CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b) ==
           CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) ==
           CUBLAS_STATUS_SUCCESS;
  // Stored matrices, column-major: W is (OC, C) with leading dimension OC [in_out] or (C, OC) with
  // C [out_in]; inp^T is (C, N), leading dimension C; out^T is (OC, N), leading dimension OC.
  const bool in_out = op_a == CUBLAS_OP_N;
  ok = ok &&
       cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, static_cast<std::uint64_t>(in_out ? OC : C),
                                  static_cast<std::uint64_t>(in_out ? C : OC),
                                  in_out ? OC : C) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, static_cast<std::uint64_t>(C), static_cast<std::uint64_t>(N),
                                  C) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&plan->d, CUDA_R_32F, static_cast<std::uint64_t>(OC), static_cast<std::uint64_t>(N),
                                  OC) == CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulPreference_t preference = nullptr;
  ok = ok && cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS;
  if (ok) {
    const std::uint64_t bytes = workspace_bytes;
    const std::uint32_t no_split_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    const auto a_alignment = static_cast<std::uint32_t>(align_weight);
    const auto b_alignment = static_cast<std::uint32_t>(align_inp);
    const auto d_alignment = static_cast<std::uint32_t>(align_out);
    ok =
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                             sizeof bytes) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                             &no_split_reduction, sizeof no_split_reduction) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a_alignment,
                                             sizeof a_alignment) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b_alignment,
                                             sizeof b_alignment) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &d_alignment,
                                             sizeof d_alignment) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d_alignment,
                                             sizeof d_alignment) == CUBLAS_STATUS_SUCCESS;
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ok = ok &&
       cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, preference, 1, &result,
                                      &found) == CUBLAS_STATUS_SUCCESS &&
       found > 0;
  if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
  if (ok) plan->algo = result.algo;
  return plans_.emplace(key, ok ? std::move(plan) : nullptr).first->second.get();
}

cublasStatus_t BiasMatmul::forward(cudaStream_t stream, float* out, const std::uint16_t* inp, const void* weight,
                                   const float* bias, const MatmulShape& shape, void* workspace,
                                   std::size_t workspace_bytes) {
  if (alignment_of(bias) < 16) return CUBLAS_STATUS_NOT_SUPPORTED;
  const Key key{
      static_cast<int>(shape.layout), shape.rows,        shape.in_features, shape.out_features, alignment_of(inp),
      alignment_of(weight),           alignment_of(out), workspace_bytes};
  const Plan* plan = plan_for(key);
  if (plan == nullptr) return CUBLAS_STATUS_NOT_SUPPORTED;
  const cublasStatus_t status =
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(handle_, plan->desc, &alpha, weight, plan->a, inp, plan->b, &beta, out, plan->d, out, plan->d,
                        &plan->algo, workspace, workspace_bytes, stream);
}

}  // namespace strata::cuda
