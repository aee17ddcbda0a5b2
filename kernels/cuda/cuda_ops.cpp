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
#include "kernels/cuda/linear_algebra.hpp"
#include "kernels/cuda/matmul.hpp"
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
  // Not host_kernel: the host's cores do not address device memory.
  bool supports(Op op) const noexcept override { return op < Op::count && op != Op::host_kernel; }

  void run(Op id, void* record) noexcept override {
    switch (id) {
      case Op::matmul_forward: return matmul_forward(record_of<op::MatmulForward>(record));
      case Op::matmul_backward: return matmul_backward(record_of<op::MatmulBackward>(record));
      case Op::matmul_forward_bf16_input:
        return matmul_forward_bf16_input(record_of<op::MatmulForwardBf16Input>(record));
      case Op::matmul_backward_bf16_input:
        return matmul_backward_bf16_input(record_of<op::MatmulBackwardBf16Input>(record));
      case Op::gemm:
        return issue("gemm", [&] { check_cublas("gemm", cuda::gemm(cublas_.get(), record_of<op::Gemm>(record))); });
      case Op::layernorm_forward: {
        const auto& r = record_of<op::LayernormForward>(record);
        return issue("layernorm_forward", [&] {
          cuda::layernorm_forward(stream_, r.out, r.mean, r.rstd, r.inp, r.weight, r.bias, r.rows, r.channels, r.eps);
        });
      }
      case Op::layernorm_backward: {
        const auto& r = record_of<op::LayernormBackward>(record);
        return issue("layernorm_backward", [&] {
          void* partials = reserve(WorkspaceSlot::row_partials, layernorm_backward_workspace_bytes(r.rows, r.channels));
          cuda::layernorm_backward(stream_, r.dinp, r.dweight, r.dbias, r.dout, r.inp, r.weight, r.mean, r.rstd, r.rows,
                                   r.channels, partials);
        });
      }
      case Op::rmsnorm_forward: {
        const auto& r = record_of<op::RmsnormForward>(record);
        return issue("rmsnorm_forward", [&] {
          cuda::rmsnorm_forward(stream_, r.out, r.rstd, r.inp, r.weight, r.rows, r.channels, r.eps, r.weight_offset);
        });
      }
      case Op::rmsnorm_backward: {
        const auto& r = record_of<op::RmsnormBackward>(record);
        return issue("rmsnorm_backward", [&] {
          void* partials = reserve(WorkspaceSlot::row_partials, rmsnorm_backward_workspace_bytes(r.rows, r.channels));
          cuda::rmsnorm_backward(stream_, r.dinp, r.dweight, r.dout, r.inp, r.weight, r.rstd, r.rows, r.channels,
                                 r.weight_offset, partials);
        });
      }
      case Op::attention_sizes: {
        auto& r = record_of<op::AttentionSizes>(record);
        r.saved_floats = cuda::attention_saved_floats(r.shape);
        r.scratch_floats = cuda::attention_scratch_floats(r.shape);
        return;
      }
      case Op::attention_forward: {
        const auto& r = record_of<op::AttentionForward>(record);
        return issue("attention_forward", [&] {
          check_cublas("attention_forward",
                       cuda::attention_forward(stream_, cublas_.get(), r.shape, r.out, r.saved, r.in));
        });
      }
      case Op::attention_backward: {
        const auto& r = record_of<op::AttentionBackward>(record);
        return issue("attention_backward", [&] {
          check_cublas("attention_backward", cuda::attention_backward(stream_, cublas_.get(), r.shape, r.grads, r.dout,
                                                                      r.in, r.saved, r.scratch));
        });
      }
      case Op::attention_decode: {
        const auto& r = record_of<op::AttentionDecode>(record);
        return issue("attention_decode",
                     [&] { cuda::attention_decode(stream_, r.shape, r.out, r.in, r.k_cache, r.v_cache); });
      }
      case Op::gelu_forward: {
        const auto& r = record_of<op::GeluForward>(record);
        return issue("gelu_forward", [&] { cuda::gelu_forward(stream_, r.out, r.inp, r.count); });
      }
      case Op::gelu_backward: {
        const auto& r = record_of<op::GeluBackward>(record);
        return issue("gelu_backward", [&] { cuda::gelu_backward(stream_, r.dinp, r.inp, r.dout, r.count, r.write); });
      }
      case Op::swiglu_forward: {
        const auto& r = record_of<op::SwigluForward>(record);
        return issue("swiglu_forward", [&] { cuda::swiglu_forward(stream_, r.out, r.gate, r.up, r.count); });
      }
      case Op::swiglu_backward: {
        const auto& r = record_of<op::SwigluBackward>(record);
        return issue("swiglu_backward",
                     [&] { cuda::swiglu_backward(stream_, r.dgate, r.dup, r.dout, r.gate, r.up, r.count, r.write); });
      }
      case Op::geglu_forward: {
        const auto& r = record_of<op::GegluForward>(record);
        return issue("geglu_forward", [&] { cuda::geglu_forward(stream_, r.out, r.gate, r.up, r.count); });
      }
      case Op::geglu_backward: {
        const auto& r = record_of<op::GegluBackward>(record);
        return issue("geglu_backward",
                     [&] { cuda::geglu_backward(stream_, r.dgate, r.dup, r.dout, r.gate, r.up, r.count, r.write); });
      }
      case Op::rope: return rope(record_of<op::Rope>(record));
      case Op::residual_forward: {
        const auto& r = record_of<op::ResidualForward>(record);
        return issue("residual_forward", [&] { cuda::residual_forward(stream_, r.out, r.a, r.b, r.count); });
      }
      case Op::embedding_forward: return embedding_forward(record_of<op::EmbeddingForward>(record));
      case Op::embedding_backward: {
        const auto& r = record_of<op::EmbeddingBackward>(record);
        return issue("embedding_backward", [&] {
          const std::size_t bytes = embedding_backward_workspace_bytes(r.batch, r.seq_len);
          void* sort = reserve(WorkspaceSlot::sort, bytes);
          cuda::embedding_backward(stream_, r.dwte, r.dwpe, r.dout, r.tokens, r.batch, r.seq_len, r.channels,
                                   r.positions, r.scale, sort, bytes);
        });
      }
      case Op::cross_entropy_forward_chunk: {
        const auto& r = record_of<op::CrossEntropyForwardChunk>(record);
        return issue("cross_entropy_forward_chunk", [&] {
          cuda::cross_entropy_forward_chunk(stream_, r.running_max, r.running_sum, r.target_logits, r.logits, r.targets,
                                            r.rows, r.first, r.width, r.vocab);
        });
      }
      case Op::cross_entropy_finish: {
        const auto& r = record_of<op::CrossEntropyFinish>(record);
        return issue("cross_entropy_finish", [&] {
          cuda::cross_entropy_finish(stream_, r.losses, r.logsumexp, r.running_max, r.running_sum, r.target_logits,
                                     r.targets, r.rows);
        });
      }
      case Op::cross_entropy_backward_chunk: {
        const auto& r = record_of<op::CrossEntropyBackwardChunk>(record);
        return issue("cross_entropy_backward_chunk", [&] {
          cuda::cross_entropy_backward_chunk(stream_, r.dlogits, r.logits, r.logsumexp, r.targets, r.dloss, r.rows,
                                             r.first, r.width, r.vocab);
        });
      }
      case Op::widen: {
        const auto& r = record_of<op::Widen>(record);
        return issue("widen", [&] { cuda::widen(stream_, r.out, r.in, r.count); });
      }
      case Op::narrow: {
        const auto& r = record_of<op::Narrow>(record);
        return issue("narrow", [&] { cuda::narrow(stream_, r.out, r.in, r.count); });
      }
      case Op::narrow_and_round: {
        const auto& r = record_of<op::NarrowAndRound>(record);
        return issue("narrow_and_round", [&] { cuda::narrow_and_round(stream_, r.out, r.in, r.count); });
      }
      case Op::sum_of_squares: {
        auto& r = record_of<op::SumOfSquares>(record);
        r.result = reduce_to_double("sum_of_squares", [&](double* result, double* partials) {
          cuda::sum_of_squares(stream_, r.values, r.count, result, partials);
        });
        return;
      }
      case Op::sum: {
        auto& r = record_of<op::Sum>(record);
        r.result = reduce_to_double(
            "sum", [&](double* result, double* partials) { cuda::sum(stream_, r.values, r.count, result, partials); });
        return;
      }
      case Op::all_finite: {
        auto& r = record_of<op::AllFinite>(record);
        int finite = 0;
        issue("all_finite", [&] {
          auto* result = static_cast<int*>(reserve(WorkspaceSlot::reduction, reduction_bytes()));
          cuda::all_finite(stream_, r.values, r.count, result, result + 1);
          check_launch("all_finite");
          download(&finite, result, sizeof finite);
        });
        r.result = finite != 0;
        return;
      }
      case Op::scale: {
        const auto& r = record_of<op::Scale>(record);
        return issue("scale", [&] { cuda::scale(stream_, r.values, r.factor, r.count); });
      }
      case Op::add_scaled: {
        const auto& r = record_of<op::AddScaled>(record);
        return issue("add_scaled", [&] { cuda::add_scaled(stream_, r.y, r.alpha, r.x, r.count); });
      }
      case Op::sign: {
        const auto& r = record_of<op::Sign>(record);
        return issue("sign", [&] { cuda::sign(stream_, r.out, r.x, r.count); });
      }
      case Op::mul: {
        const auto& r = record_of<op::Mul>(record);
        return issue("mul", [&] { cuda::mul(stream_, r.out, r.a, r.b, r.count); });
      }
      case Op::div: {
        const auto& r = record_of<op::Div>(record);
        return issue("div", [&] { cuda::div(stream_, r.out, r.a, r.b, r.eps, r.count); });
      }
      case Op::sqrt: {
        const auto& r = record_of<op::Sqrt>(record);
        return issue("sqrt", [&] { cuda::sqrt(stream_, r.out, r.x, r.count); });
      }
      case Op::fill: {
        const auto& r = record_of<op::Fill>(record);
        return issue("fill", [&] { check_cuda("fill", cudaMemsetAsync(r.data, r.byte, r.bytes, stream_)); });
      }
      case Op::copy: {
        const auto& r = record_of<op::Copy>(record);
        return issue("copy", [&] {
          check_cuda("copy", cudaMemcpyAsync(r.destination, r.source, r.bytes, cudaMemcpyDefault, stream_));
        });
      }
      case Op::copy_to_host: {
        const auto& r = record_of<op::CopyToHost>(record);
        return issue("copy_to_host", [&] { download(r.host_destination, r.source, r.bytes); });
      }
      case Op::copy_from_host: {
        const auto& r = record_of<op::CopyFromHost>(record);
        return issue("copy_from_host", [&] {
          check_cuda("copy_from_host",
                     cudaMemcpyAsync(r.destination, r.host_source, r.bytes, cudaMemcpyDefault, stream_));
          // The caller may free or reuse its host buffer as soon as this returns.
          check_cuda("copy_from_host", cudaStreamSynchronize(stream_));
        });
      }
      case Op::qr: {
        const auto& r = record_of<op::Qr>(record);
        return issue("qr", [&] {
          const std::size_t bytes = qr_workspace_bytes(solver(), r.rows, r.cols);
          check_solver("qr", cuda::qr(stream_, cublas_.get(), solver(), r.a, r.r, r.rows, r.cols,
                                      reserve(WorkspaceSlot::solver, bytes), bytes));
        });
      }
      case Op::eigh: {
        const auto& r = record_of<op::Eigh>(record);
        return issue("eigh", [&] {
          const std::size_t bytes = eigh_workspace_bytes(solver(), r.n);
          check_solver("eigh",
                       cuda::eigh(stream_, solver(), r.a, r.values, r.n, reserve(WorkspaceSlot::solver, bytes), bytes));
        });
      }
      case Op::host_kernel:
      case Op::count: break;
    }
    unsupported(id);
  }

 private:
  void matmul_forward(const op::MatmulForward& r) noexcept {
    issue("matmul_forward", [&] {
      void* staging = r.weight.dtype == DType::bf16
                          ? reserve(WorkspaceSlot::bf16_staging, matmul_bf16_workspace_bytes(r.shape))
                          : nullptr;
      check_cublas("matmul_forward", cuda::matmul_forward(stream_, cublas_.get(), r.out, r.inp, r.weight, r.bias,
                                                          r.shape, staging, tf32_, bias_epilogue()));
    });
  }
  void matmul_backward(const op::MatmulBackward& r) noexcept {
    issue("matmul_backward", [&] {
      void* staging = r.weight.dtype == DType::bf16
                          ? reserve(WorkspaceSlot::bf16_staging, matmul_bf16_workspace_bytes(r.shape))
                          : nullptr;
      const float* ones = r.dbias != nullptr ? ones_for(r.shape.rows) : nullptr;
      check_cublas("matmul_backward",
                   cuda::matmul_backward(stream_, cublas_.get(), r.dinp, r.dweight, r.dbias, r.dout, r.inp, r.weight,
                                         r.shape, r.dinp_write, ones, staging, tf32_));
    });
  }
  // bf16 weights only (the op's contract): the input needs no narrowing, so no staging forward,
  // and dout's alone backward.
  void matmul_forward_bf16_input(const op::MatmulForwardBf16Input& r) noexcept {
    issue("matmul_forward_bf16_input", [&] {
      check_cublas("matmul_forward_bf16_input",
                   cuda::matmul_forward_bf16_input(stream_, cublas_.get(), r.out, r.inp, r.weight, r.bias, r.shape,
                                                   bias_epilogue()));
    });
  }
  void matmul_backward_bf16_input(const op::MatmulBackwardBf16Input& r) noexcept {
    issue("matmul_backward_bf16_input", [&] {
      void* staging =
          reserve(WorkspaceSlot::bf16_staging, static_cast<std::size_t>(r.shape.rows * r.shape.out_features) * 2);
      const float* ones = r.dbias != nullptr ? ones_for(r.shape.rows) : nullptr;
      check_cublas("matmul_backward_bf16_input",
                   cuda::matmul_backward_bf16_input(stream_, cublas_.get(), r.dinp, r.dweight, r.dbias, r.dout, r.inp,
                                                    r.weight, r.shape, r.dinp_write, ones, staging));
    });
  }
  // Training's (theta, first position 0), decoding's (theta, consecutive positions) and a scaled
  // RoPE's (given frequencies) are one kernel; given positions (packed documents) too.
  void rope(const op::Rope& r) noexcept {
    issue("rope", [&] {
      if (r.positions != nullptr)
        cuda::rope_positions(stream_, r.x, r.rows, r.stride, r.positions, r.n_heads, r.head_dim, r.theta,
                             r.inverse_frequencies, r.inverse);
      else if (r.inverse_frequencies != nullptr)
        cuda::rope_frequencies(stream_, r.x, r.rows, r.stride, r.seq_len, r.first_position, r.n_heads, r.head_dim,
                               r.inverse_frequencies, r.inverse);
      else if (r.first_position == 0)
        cuda::rope(stream_, r.x, r.rows, r.stride, static_cast<int>(r.seq_len), r.n_heads, r.head_dim, r.theta,
                   r.inverse);
      else if (r.seq_len >= r.rows && !r.inverse)
        cuda::rope_at(stream_, r.x, r.rows, r.stride, r.first_position, r.n_heads, r.head_dim, r.theta);
      else
        throw std::runtime_error("rope: positions from first_position " + std::to_string(r.first_position) +
                                 " wrapping at seq_len " + std::to_string(r.seq_len) +
                                 " without given frequencies are not implemented on CUDA");
    });
  }
  void embedding_forward(const op::EmbeddingForward& r) noexcept {
    issue("embedding_forward", [&] {
      if (r.wte.dtype == DType::bf16)
        cuda::embedding_forward_bf16(stream_, r.out, r.tokens, static_cast<const std::uint16_t*>(r.wte.data),
                                     static_cast<const std::uint16_t*>(r.wpe.data), r.batch, r.seq_len, r.channels,
                                     r.positions, r.scale);
      else
        cuda::embedding_forward(stream_, r.out, r.tokens, static_cast<const float*>(r.wte.data),
                                static_cast<const float*>(r.wpe.data), r.batch, r.seq_len, r.channels, r.positions,
                                r.scale);
    });
  }

  const Solver& solver() {
    if (!solver_) solver_ = std::make_unique<Solver>(stream_);
    return *solver_;
  }
  void check_solver(const char* op, const char* failure) {
    if (failure != nullptr) throw std::runtime_error(name_ + " " + op + ": " + failure);
  }

  // Runs one op unless an earlier one failed; keeps the first failure for take_error().
  template <typename Body>
  void issue(const char* op, Body&& body) noexcept {
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
    issue(op, [&] {
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
  std::unique_ptr<Solver> solver_;  // started on the first factorization
  const float* ones_ = nullptr;
  std::int64_t ones_count_ = 0;
};

}  // namespace

std::unique_ptr<CudaOps> make_cuda_ops(std::string name, cudaStream_t stream, WorkspaceSource& workspace,
                                       bool tf32_products) {
  return std::make_unique<CudaOpsImpl>(std::move(name), stream, workspace, tf32_products);
}

}  // namespace strata::cuda
