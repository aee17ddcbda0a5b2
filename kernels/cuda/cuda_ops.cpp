#include "kernels/cuda/cuda_ops.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/cross_entropy.hpp"
#include "kernels/cuda/decode.hpp"
#include "kernels/cuda/elementwise.hpp"
#include "kernels/cuda/embedding.hpp"
#include "kernels/cuda/layernorm.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/optimizers.hpp"
#include "kernels/cuda/pointwise.hpp"
#include "kernels/cuda/reductions.hpp"
#include "kernels/cuda/rmsnorm.hpp"
#include "kernels/cuda/rope.hpp"

// Pointers an op receives may be device memory or the backend's pinned host arena (offloaded
// optimizer state and gradients): pinned memory is mapped into the device's address space, so
// kernels read it across the bus in place, and copies name no direction (cudaMemcpyDefault).
namespace strata::cuda {

namespace {

// cuBLAS gets one fixed workspace for the whole run, so it picks the same algorithm every time
// (its results are then reproducible run to run).
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

class CublasHandle {
 public:
  CublasHandle() {
    if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLAS could not start");
  }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const noexcept { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

class CudaOpsImpl final : public CudaOps {
 public:
  CudaOpsImpl(std::string name, cudaStream_t stream, WorkspaceSource& workspace, bool tf32_products)
      : name_(std::move(name)), stream_(stream), workspace_(workspace), tf32_(tf32_products) {
    check_cuda("start", cudaGetDevice(&device_));  // the backend made its device current
    cublasSetStream(cublas_.get(), stream_);
    cublas_workspace_ = workspace_.reserve(WorkspaceSlot::cublas, kCublasWorkspaceBytes);
    cublasSetWorkspace(cublas_.get(), cublas_workspace_, kCublasWorkspaceBytes);
    // Host-side scalars (alpha, beta). The default math mode keeps f32 products in f32; TF32 mode
    // lets attention's batched products use the tensor cores (matmul.cu picks its compute type).
    cublasSetPointerMode(cublas_.get(), CUBLAS_POINTER_MODE_HOST);
    cublasSetMathMode(cublas_.get(), tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  }

  std::exception_ptr take_error() noexcept override { return std::exchange(error_, nullptr); }

  std::string_view backend() const noexcept override { return name_; }
  bool has(Op op) const noexcept override { return op != Op::count; }

  void matmul_forward(float* out, const float* inp, Weight weight, const float* bias, const MatmulShape& shape,
                      Scratch) noexcept override {
    run("matmul_forward", [&] {
      void* staging = weight.dtype == DType::bf16
                          ? reserve(WorkspaceSlot::bf16_staging, matmul_bf16_workspace_bytes(shape))
                          : nullptr;
      check_cublas("matmul_forward", cuda::matmul_forward(stream_, cublas_.get(), out, inp, weight, bias, shape,
                                                          staging, tf32_, bias_epilogue()));
    });
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, Weight weight,
                       const MatmulShape& shape, Scratch, GradientWrite dinp_write) noexcept override {
    run("matmul_backward", [&] {
      void* staging = weight.dtype == DType::bf16
                          ? reserve(WorkspaceSlot::bf16_staging, matmul_bf16_workspace_bytes(shape))
                          : nullptr;
      const float* ones = dbias != nullptr ? ones_for(shape.rows) : nullptr;
      check_cublas("matmul_backward", cuda::matmul_backward(stream_, cublas_.get(), dinp, dweight, dbias, dout, inp,
                                                            weight, shape, dinp_write, ones, staging, tf32_));
    });
  }

  // bf16 weights only (the op's contract): the input needs no narrowing, so no staging forward,
  // and dout's alone backward.
  void matmul_forward_bf16_input(float* out, const std::uint16_t* inp, Weight weight, const float* bias,
                                 const MatmulShape& shape) noexcept override {
    run("matmul_forward_bf16_input", [&] {
      check_cublas("matmul_forward_bf16_input", cuda::matmul_forward_bf16_input(stream_, cublas_.get(), out, inp,
                                                                                weight, bias, shape, bias_epilogue()));
    });
  }
  void matmul_backward_bf16_input(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const std::uint16_t* inp, Weight weight, const MatmulShape& shape,
                                  GradientWrite dinp_write) noexcept override {
    run("matmul_backward_bf16_input", [&] {
      void* staging =
          reserve(WorkspaceSlot::bf16_staging, static_cast<std::size_t>(shape.rows * shape.out_features) * 2);
      const float* ones = dbias != nullptr ? ones_for(shape.rows) : nullptr;
      check_cublas("matmul_backward_bf16_input",
                   cuda::matmul_backward_bf16_input(stream_, cublas_.get(), dinp, dweight, dbias, dout, inp, weight,
                                                    shape, dinp_write, ones, staging));
    });
  }

  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                         std::int64_t rows, std::int64_t channels, float eps) noexcept override {
    run("layernorm_forward",
        [&] { cuda::layernorm_forward(stream_, out, mean, rstd, inp, weight, bias, rows, channels, eps); });
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, std::int64_t rows,
                          std::int64_t channels) noexcept override {
    run("layernorm_backward", [&] {
      void* partials = reserve(WorkspaceSlot::row_partials, layernorm_backward_workspace_bytes(rows, channels));
      cuda::layernorm_backward(stream_, dinp, dweight, dbias, dout, inp, weight, mean, rstd, rows, channels, partials);
    });
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t rows,
                       std::int64_t channels, float eps) noexcept override {
    run("rmsnorm_forward", [&] { cuda::rmsnorm_forward(stream_, out, rstd, inp, weight, rows, channels, eps); });
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                        const float* rstd, std::int64_t rows, std::int64_t channels) noexcept override {
    run("rmsnorm_backward", [&] {
      void* partials = reserve(WorkspaceSlot::row_partials, rmsnorm_backward_workspace_bytes(rows, channels));
      cuda::rmsnorm_backward(stream_, dinp, dweight, dout, inp, weight, rstd, rows, channels, partials);
    });
  }

  std::int64_t attention_saved_floats(const AttentionShape& shape) const noexcept override {
    return cuda::attention_saved_floats(shape);
  }
  std::int64_t attention_scratch_floats(const AttentionShape& shape) const noexcept override {
    return cuda::attention_scratch_floats(shape);
  }
  void attention_forward(const AttentionShape& shape, float* out, float* saved,
                         const AttentionInputs& in) noexcept override {
    run("attention_forward", [&] {
      check_cublas("attention_forward", cuda::attention_forward(stream_, cublas_.get(), shape, out, saved, in));
    });
  }
  void attention_backward(const AttentionShape& shape, const AttentionGrads& grads, const float* dout,
                          const AttentionInputs& in, const float* saved, float* scratch) noexcept override {
    run("attention_backward", [&] {
      check_cublas("attention_backward",
                   cuda::attention_backward(stream_, cublas_.get(), shape, grads, dout, in, saved, scratch));
    });
  }

  void gelu_forward(float* out, const float* inp, std::int64_t count) noexcept override {
    run("gelu_forward", [&] { cuda::gelu_forward(stream_, out, inp, count); });
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t count,
                     GradientWrite write) noexcept override {
    run("gelu_backward", [&] { cuda::gelu_backward(stream_, dinp, inp, dout, count, write); });
  }
  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t count) noexcept override {
    run("swiglu_forward", [&] { cuda::swiglu_forward(stream_, out, gate, up, count); });
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       std::int64_t count, GradientWrite write) noexcept override {
    run("swiglu_backward", [&] { cuda::swiglu_backward(stream_, dgate, dup, dout, gate, up, count, write); });
  }
  void rope(float* x, std::int64_t rows, std::int64_t stride, int seq_len, int n_heads, int head_dim, float theta,
            bool inverse) noexcept override {
    run("rope", [&] { cuda::rope(stream_, x, rows, stride, seq_len, n_heads, head_dim, theta, inverse); });
  }
  void rope_at(float* x, std::int64_t rows, std::int64_t stride, std::int64_t first_position, int n_heads, int head_dim,
               float theta) noexcept override {
    run("rope_at", [&] { cuda::rope_at(stream_, x, rows, stride, first_position, n_heads, head_dim, theta); });
  }
  void attention_decode(const DecodeShape& shape, float* out, const AttentionInputs& in, float* k_cache,
                        float* v_cache) noexcept override {
    run("attention_decode", [&] { cuda::attention_decode(stream_, shape, out, in, k_cache, v_cache); });
  }
  void rope_frequencies(float* x, std::int64_t rows, std::int64_t stride, std::int64_t seq_len,
                        std::int64_t first_position, int n_heads, int head_dim, const float* inverse_frequencies,
                        bool inverse) noexcept override {
    run("rope_frequencies", [&] {
      cuda::rope_frequencies(stream_, x, rows, stride, seq_len, first_position, n_heads, head_dim, inverse_frequencies,
                             inverse);
    });
  }
  void residual_forward(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    run("residual_forward", [&] { cuda::residual_forward(stream_, out, a, b, count); });
  }

  void embedding_forward(float* out, const std::int32_t* tokens, Weight wte, Weight wpe, std::int64_t batch,
                         std::int64_t seq_len, std::int64_t channels) noexcept override {
    run("embedding_forward", [&] {
      if (wte.dtype == DType::bf16)
        cuda::embedding_forward_bf16(stream_, out, tokens, static_cast<const std::uint16_t*>(wte.data),
                                     static_cast<const std::uint16_t*>(wpe.data), batch, seq_len, channels);
      else
        cuda::embedding_forward(stream_, out, tokens, static_cast<const float*>(wte.data),
                                static_cast<const float*>(wpe.data), batch, seq_len, channels);
    });
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels) noexcept override {
    run("embedding_backward", [&] {
      const std::size_t bytes = embedding_backward_workspace_bytes(batch, seq_len);
      void* sort = reserve(WorkspaceSlot::sort, bytes);
      cuda::embedding_backward(stream_, dwte, dwpe, dout, tokens, batch, seq_len, channels, sort, bytes);
    });
  }

  void cross_entropy_forward_chunk(float* running_max, float* running_sum, float* target_logits, const float* logits,
                                   const std::int32_t* targets, std::int64_t rows, std::int64_t first,
                                   std::int64_t width, std::int64_t vocab) noexcept override {
    run("cross_entropy_forward_chunk", [&] {
      cuda::cross_entropy_forward_chunk(stream_, running_max, running_sum, target_logits, logits, targets, rows, first,
                                        width, vocab);
    });
  }
  void cross_entropy_finish(float* losses, float* logsumexp, const float* running_max, const float* running_sum,
                            const float* target_logits, std::int64_t rows) noexcept override {
    run("cross_entropy_finish",
        [&] { cuda::cross_entropy_finish(stream_, losses, logsumexp, running_max, running_sum, target_logits, rows); });
  }
  void cross_entropy_backward_chunk(float* dlogits, const float* logits, const float* logsumexp,
                                    const std::int32_t* targets, float dloss, std::int64_t rows, std::int64_t first,
                                    std::int64_t width, std::int64_t vocab) noexcept override {
    run("cross_entropy_backward_chunk", [&] {
      cuda::cross_entropy_backward_chunk(stream_, dlogits, logits, logsumexp, targets, dloss, rows, first, width,
                                         vocab);
    });
  }

  void adamw_update(float* param, const float* grad, float* m, float* v, std::int64_t count,
                    const AdamWHyper& hyper) noexcept override {
    run("adamw_update", [&] { cuda::adamw_update(stream_, param, grad, m, v, count, hyper); });
  }
  void sgd_update(float* param, const float* grad, float* velocity, std::int64_t count,
                  const SgdHyper& hyper) noexcept override {
    run("sgd_update", [&] { cuda::sgd_update(stream_, param, grad, velocity, count, hyper); });
  }

  void widen(float* out, const std::uint16_t* in, std::int64_t count) noexcept override {
    run("widen", [&] { cuda::widen(stream_, out, in, count); });
  }
  void narrow(std::uint16_t* out, const float* in, std::int64_t count) noexcept override {
    run("narrow", [&] { cuda::narrow(stream_, out, in, count); });
  }
  void narrow_and_round(std::uint16_t* out, float* in, std::int64_t count) noexcept override {
    run("narrow_and_round", [&] { cuda::narrow_and_round(stream_, out, in, count); });
  }

  void scale(float* values, float factor, std::int64_t count) noexcept override {
    run("scale", [&] { cuda::scale(stream_, values, factor, count); });
  }
  void add_scaled(float* y, float alpha, const float* x, std::int64_t count) noexcept override {
    run("add_scaled", [&] { cuda::add_scaled(stream_, y, alpha, x, count); });
  }
  void sign(float* out, const float* x, std::int64_t count) noexcept override {
    run("sign", [&] { cuda::sign(stream_, out, x, count); });
  }
  void mul(float* out, const float* a, const float* b, std::int64_t count) noexcept override {
    run("mul", [&] { cuda::mul(stream_, out, a, b, count); });
  }
  void div(float* out, const float* a, const float* b, float eps, std::int64_t count) noexcept override {
    run("div", [&] { cuda::div(stream_, out, a, b, eps, count); });
  }
  void sqrt(float* out, const float* x, std::int64_t count) noexcept override {
    run("sqrt", [&] { cuda::sqrt(stream_, out, x, count); });
  }

  double sum_of_squares(const float* values, std::int64_t count) noexcept override {
    return reduce_to_double("sum_of_squares", [&](double* result, double* partials) {
      cuda::sum_of_squares(stream_, values, count, result, partials);
    });
  }
  double sum(const float* values, std::int64_t count) noexcept override {
    return reduce_to_double(
        "sum", [&](double* result, double* partials) { cuda::sum(stream_, values, count, result, partials); });
  }
  bool all_finite(const float* values, std::int64_t count) noexcept override {
    int finite = 0;
    run("all_finite", [&] {
      auto* result = static_cast<int*>(reserve(WorkspaceSlot::reduction, reduction_bytes()));
      cuda::all_finite(stream_, values, count, result, result + 1);
      check_launch("all_finite");
      download(&finite, result, sizeof finite);
    });
    return finite != 0;
  }

  void fill(void* data, std::uint8_t byte, std::uint64_t bytes) noexcept override {
    run("fill", [&] { check_cuda("fill", cudaMemsetAsync(data, byte, bytes, stream_)); });
  }
  void copy(void* destination, const void* source, std::uint64_t bytes) noexcept override {
    run("copy", [&] { check_cuda("copy", cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, stream_)); });
  }
  void copy_to_host(void* host_destination, const void* source, std::uint64_t bytes) noexcept override {
    run("copy_to_host", [&] { download(host_destination, source, bytes); });
  }
  void copy_from_host(void* destination, const void* host_source, std::uint64_t bytes) noexcept override {
    run("copy_from_host", [&] {
      check_cuda("copy_from_host", cudaMemcpyAsync(destination, host_source, bytes, cudaMemcpyDefault, stream_));
      // The caller may free or reuse its host buffer as soon as this returns.
      check_cuda("copy_from_host", cudaStreamSynchronize(stream_));
    });
  }

 private:
  // Runs one op unless an earlier one failed; keeps the first failure for take_error().
  template <typename Body>
  void run(const char* op, Body&& body) noexcept {
    if (error_) return;
    try {
      check_cuda(op, cudaSetDevice(device_));  // another backend's device may be current
      body();
      check_launch(op);
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  void check_launch(const char* op) { check_cuda(op, cudaGetLastError()); }
  void check_cuda(const char* op, cudaError_t status) {
    if (status != cudaSuccess)
      throw std::runtime_error(name_ + " " + op + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
  void check_cublas(const char* op, cublasStatus_t status) {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(name_ + " " + op + ": cuBLAS " + cublasGetStatusName(status) + ": " +
                               cublasGetStatusString(status));
  }

  BiasEpilogue bias_epilogue() noexcept { return {&bias_matmul_, cublas_workspace_, kCublasWorkspaceBytes}; }

  void* reserve(WorkspaceSlot slot, std::size_t bytes) {
    return workspace_.reserve(slot, std::max<std::size_t>(bytes, 1));
  }

  const float* ones_for(std::int64_t rows) {
    auto* ones = static_cast<float*>(reserve(WorkspaceSlot::ones, static_cast<std::size_t>(rows) * sizeof(float)));
    if (ones != ones_ || rows > ones_count_) {  // a new or larger block: fill it
      fill_floats(stream_, ones, 1.0f, rows);
      ones_ = ones;
      ones_count_ = rows;
    }
    return ones;
  }

  static std::size_t reduction_bytes() { return (kReductionPartials + 1) * sizeof(double); }

  template <typename Launch>
  double reduce_to_double(const char* op, Launch&& launch) noexcept {
    double value = std::numeric_limits<double>::quiet_NaN();
    run(op, [&] {
      auto* result = static_cast<double*>(reserve(WorkspaceSlot::reduction, reduction_bytes()));
      launch(result, result + 1);
      check_launch(op);
      download(&value, result, sizeof value);
    });
    return value;
  }

  // Waits for the stream, so the value is on the host when this returns.
  void download(void* host_destination, const void* source, std::uint64_t bytes) {
    check_cuda("copy_to_host", cudaMemcpyAsync(host_destination, source, bytes, cudaMemcpyDefault, stream_));
    check_cuda("copy_to_host", cudaStreamSynchronize(stream_));
  }

  std::string name_;
  cudaStream_t stream_;
  WorkspaceSource& workspace_;
  CublasHandle cublas_;
  void* cublas_workspace_ = nullptr;  // shared with bias_matmul_: both run on stream_ only
  BiasMatmul bias_matmul_;
  bool tf32_;
  int device_ = 0;
  std::exception_ptr error_;
  const float* ones_ = nullptr;
  std::int64_t ones_count_ = 0;
};

}  // namespace

std::unique_ptr<CudaOps> make_cuda_ops(std::string name, cudaStream_t stream, WorkspaceSource& workspace,
                                       bool tf32_products) {
  return std::make_unique<CudaOpsImpl>(std::move(name), stream, workspace, tf32_products);
}

}  // namespace strata::cuda
